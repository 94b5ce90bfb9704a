// CustomOps>DeformableConv2d and its gradient op in the portable kernels: their
// entry points, for the OpKernels (deform_conv2d_op.cc), and, for the
// core's own sources, their functors.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The validated geometry of one call (deform_conv2d_shape.h): input
 * [n, h, w, c] (NCHW when nchw), filter HWIO [kh, kw, c / groups, o], offset
 * [n, ho, wo, 2 * offset_groups * kh * kw], mask [n, ho, wo, offset_groups *
 * kh * kw] when use_mask, output [n, ho, wo, o]; offset, mask and output are
 * NCHW too when nchw. Every size is non-negative, c >= 1, kh, kw >= 1,
 * strides and dilations >= 1, groups and offset_groups divide c, groups
 * divides o, and every tensor's element count fits int64. */
typedef struct TfcoDeformConv2dArgs {
  int64_t n, h, w, c, kh, kw, o, ho, wo;
  int64_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
  int64_t groups, offset_groups;
  int nchw, use_mask;
} TfcoDeformConv2dArgs;

/* output = the deformable convolution of input with filter; mask is ignored
 * (may be NULL) unless use_mask. */
TFCO_CORE_API TfcoError TfcoDeformableConv2d(
    const TfcoDevice* device, TfcoDtype dtype, const TfcoDeformConv2dArgs* args,
    const void* input, const void* filter, const void* offset, const void* mask,
    void* output);

/* The gradients of output with respect to input, filter, offset and mask
 * (written only when use_mask), given grad_output. */
TFCO_CORE_API TfcoError TfcoDeformableConv2dGrad(
    const TfcoDevice* device, TfcoDtype dtype, const TfcoDeformConv2dArgs* args,
    const void* input, const void* filter, const void* offset, const void* mask,
    const void* grad_output, void* grad_input, void* grad_filter,
    void* grad_offset, void* grad_mask);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef TFCO_PORTABLE
#include <cmath>
#include <type_traits>

#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

// Element strides of a 4-D tensor as (image, row, column, channel); for maps
// over the output pixels (offset, mask, output), (image, pixel, 0, channel).
struct Strides {
  int64_t n, y, x, c;
};

EIGEN_DEVICE_FUNC inline Strides InputStrides(const TfcoDeformConv2dArgs& a) {
  return a.nchw ? Strides{a.c * a.h * a.w, a.w, 1, a.h * a.w}
                : Strides{a.h * a.w * a.c, a.w * a.c, a.c, 1};
}

EIGEN_DEVICE_FUNC inline Strides MapStrides(const TfcoDeformConv2dArgs& a,
                                            int64_t channels) {
  const int64_t plane = a.ho * a.wo;
  return a.nchw ? Strides{channels * plane, 1, 0, plane}
                : Strides{plane * channels, channels, 0, 1};
}

// Where a sample lands and its bilinear corners, as torchvision's kernels
// read them: corners outside the map count as 0. Coordinates are compared
// before any conversion to an integer, so NaN and infinite offsets never
// reach one. Shared by the CPU and GPU kernels, so both sample alike.
template <typename A>
struct Sample {
  // NaN coordinate: the sample is NaN, its offset and mask gradients are NaN
  // and the input gets no gradient from it.
  bool nan;
  // -1 <= y < H and -1 <= x < W: the corners below are set (the offset
  // gradient is not zero on row -1 and column -1: vision#6885).
  bool near;
  // -1 < y and -1 < x too: the value is the corners' sum (0 otherwise).
  bool inside;
  bool valid[4];
  int64_t offset[4];  // corner (row * in.y + column * in.x); 0 if not valid
  A weight[4];        // bilinear weights of the corners
  A ly, lx;           // y - floor(y), x - floor(x)

  EIGEN_DEVICE_FUNC Sample(A y, A x, int64_t h, int64_t w, const Strides& in) {
    nan = Eigen::numext::isnan(y) || Eigen::numext::isnan(x);
    near = !nan && y >= A(-1) && y < static_cast<A>(h) && x >= A(-1) &&
           x < static_cast<A>(w);
    inside = near && y > A(-1) && x > A(-1);
    ly = lx = A(0);
    for (int q = 0; q < 4; ++q) {
      valid[q] = false;
      offset[q] = 0;
      weight[q] = A(0);
    }
    if (!near) return;
    const A fy = std::floor(y), fx = std::floor(x);
    const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
    ly = y - fy;
    lx = x - fx;
    const A hy = A(1) - ly, hx = A(1) - lx;
    const bool row0 = y0 >= 0, row1 = y0 + 1 < h;
    const bool col0 = x0 >= 0, col1 = x0 + 1 < w;
    valid[0] = row0 && col0;
    valid[1] = row0 && col1;
    valid[2] = row1 && col0;
    valid[3] = row1 && col1;
    const int64_t base = y0 * in.y + x0 * in.x;
    offset[0] = valid[0] ? base : 0;
    offset[1] = valid[1] ? base + in.x : 0;
    offset[2] = valid[2] ? base + in.y : 0;
    offset[3] = valid[3] ? base + in.y + in.x : 0;
    weight[0] = hy * hx;
    weight[1] = hy * lx;
    weight[2] = ly * hx;
    weight[3] = ly * lx;
  }
  EIGEN_DEVICE_FUNC bool all_valid() const {
    return valid[0] && valid[1] && valid[2] && valid[3];
  }
};

// The sample of tap k of offset group g at output pixel `pixel` (row, col)
// of image `image`, and its mask factor *m (1 without use_mask).
template <typename T, typename A>
EIGEN_DEVICE_FUNC Sample<A> SampleAt(const TfcoDeformConv2dArgs& a,
                                     const Strides& in, const Strides& off,
                                     const Strides& msk, const T* offset,
                                     const T* mask, int64_t image,
                                     int64_t pixel, int64_t row, int64_t col,
                                     int64_t k, int64_t g, A* m) {
  const int64_t tap = g * a.kh * a.kw + k;
  const T* o = offset + image * off.n + pixel * off.y;
  const A dy = static_cast<A>(o[2 * tap * off.c]);
  const A dx = static_cast<A>(o[(2 * tap + 1) * off.c]);
  *m = a.use_mask
           ? static_cast<A>(mask[image * msk.n + pixel * msk.y + tap * msk.c])
           : A(1);
  const int64_t base_y =
      row * a.stride_h - a.pad_top + (k / a.kw) * a.dilation_h;
  const int64_t base_x =
      col * a.stride_w - a.pad_left + (k % a.kw) * a.dilation_w;
  return Sample<A>(static_cast<A>(base_y) + dy, static_cast<A>(base_x) + dx,
                   a.h, a.w, in);
}

// The sum of a sample's valid corners' weight * value for the channel at
// `in` (the corner offsets are added to it), in torchvision's order.
template <typename T, typename A>
EIGEN_DEVICE_FUNC A Bilinear(const Sample<A>& s, const T* in) {
  A v = A(0);
  for (int q = 0; q < 4; ++q) {
    if (s.valid[q]) v += s.weight[q] * static_cast<A>(in[s.offset[q]]);
  }
  return v;
}

}  // namespace deform_conv2d

namespace functor {

// The type DeformableConv2d computes in: double for double, else float.
template <typename T>
using DeformConvAccumulator =
    typename std::conditional<std::is_same<T, double>::value, double,
                              float>::type;

// The forward and backward passes on Device for element type T, over the
// pointers and geometry of the entry points above.
template <typename Device, typename T>
struct DeformableConv2d {
  void operator()(const Device& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, T* output);
};

template <typename Device, typename T>
struct DeformableConv2dGrad {
  void operator()(const Device& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, const T* grad_output, T* grad_input,
                  T* grad_filter, T* grad_offset, T* grad_mask);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_OP_H_
