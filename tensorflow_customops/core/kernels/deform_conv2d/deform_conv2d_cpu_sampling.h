// The bilinear sampling loops of DeformableConv2d's CPU kernels
// (deform_conv2d_op_cpu.cc): im2col, col2im and the reduction of the offset
// and mask gradients, with the sizes and channel segments they share.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_CPU_SAMPLING_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_CPU_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"

namespace tensorflow {
namespace customops {
namespace deform_conv2d_cpu {

// The sizes every loop derives from the arguments.
struct Shape {
  explicit Shape(const TfcoDeformConv2dArgs& a)
      : args(a),
        taps(a.kh * a.kw),
        cg(a.c / a.groups),
        og(a.o / a.groups),
        kg(a.kh * a.kw * (a.c / a.groups)),
        cog(a.c / a.offset_groups),
        plane(a.ho * a.wo),
        pixels(a.n * a.ho * a.wo),
        input(deform_conv2d::InputStrides(a)) {}
  // (image, pixel, channel) strides of a map of `channels` channels over the
  // output pixels: offset, mask, output.
  deform_conv2d::Strides Map(int64_t channels) const {
    return deform_conv2d::MapStrides(args, channels);
  }

  const TfcoDeformConv2dArgs& args;
  int64_t taps, cg, og, kg, cog, plane, pixels;
  deform_conv2d::Strides input;
};

// A run of channels [c0, c1) within one offset group and one group, so that
// they share a sample position and a contiguous stretch of the columns.
struct Segment {
  int64_t c0, c1, offset_group, group;
};

// The channels split into segments, in order.
std::vector<Segment> Segments(const Shape& s);

// What the im2col, col2im and reduction loops share: the inputs, and the
// sample of tap k of offset group g at one output pixel.
template <typename T, typename A>
struct Sampler {
  const Shape& s;
  const T* input;
  const T* offset;
  const T* mask;
  deform_conv2d::Strides off, msk;

  Sampler(const Shape& shape, const T* input, const T* offset, const T* mask)
      : s(shape),
        input(input),
        offset(offset),
        mask(mask),
        off(shape.Map(2 * shape.args.offset_groups * shape.taps)),
        msk(shape.Map(shape.args.offset_groups * shape.taps)) {}

  // Image, row and column of global output pixel p.
  void Locate(int64_t p, int64_t* image, int64_t* pixel, int64_t* row,
              int64_t* col) const {
    *image = p / s.plane;
    *pixel = p % s.plane;
    *row = *pixel / s.args.wo;
    *col = *pixel % s.args.wo;
  }

  deform_conv2d::Sample<A> At(int64_t image, int64_t pixel, int64_t row,
                              int64_t col, int64_t k, int64_t g, A* m) const {
    return deform_conv2d::SampleAt<T, A>(s.args, s.input, off, msk, offset,
                                         mask, image, pixel, row, col, k, g, m);
  }

  const T* Image(int64_t image, int64_t c0) const {
    return input + image * s.input.n + c0 * s.input.c;
  }
};

// The columns of pixels [p0, p0 + count): [groups][count][kh * kw * C /
// groups], tap-major within a group.
template <typename T, typename A>
void Im2Col(const CPUDevice& d, const Sampler<T, A>& sampler,
            const std::vector<Segment>& segments, int64_t p0, int64_t count,
            A* col);

// Adds the column gradient of pixels [p0, p0 + count) onto the input
// gradient `grad` (input's layout, in A). Units are (image, segment): each
// input element is summed by one thread, pixel by pixel and tap by tap.
template <typename T, typename A>
void Col2Im(const CPUDevice& d, const Sampler<T, A>& sampler,
            const std::vector<Segment>& segments, int64_t p0, int64_t count,
            const A* dcol, A* grad);

// The offset and mask gradients of pixels [p0, p0 + count), each the sum
// over its offset group's channels, in order.
template <typename T, typename A>
void OffsetMaskGrad(const CPUDevice& d, const Sampler<T, A>& sampler,
                    const std::vector<Segment>& segments, int64_t p0,
                    int64_t count, const A* dcol, T* grad_offset, T* grad_mask);

}  // namespace deform_conv2d_cpu
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_CPU_SAMPLING_H_
