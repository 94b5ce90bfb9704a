// Shared by the RoI kernels (RoiPool, RoiAlign, PsRoiPool, PsRoiAlign), on
// CPU and GPU, by their OpKernels (the glue) and by their XLA lowerings:
// feature-map layout, box geometry and bilinear sampling. No TensorFlow
// header: the portable kernels (portable/api.h) includes it too.
//
// Semantics follow torchvision.ops: a box row is (batch_index, x1, y1, x2, y2)
// in input-image coordinates, multiplied by spatial_scale to reach
// feature-map coordinates.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GEOMETRY_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GEOMETRY_H_

#include <cmath>
#include <cstdint>

#include "tensorflow_customops/core/kernels/portable/api.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace tensorflow {
namespace customops {
namespace roi {

// Accumulation type: half and bfloat16 accumulate in float, as does float;
// double stays double.
template <typename T>
struct AccumulatorType {
  typedef float type;
};
template <>
struct AccumulatorType<double> {
  typedef double type;
};

// Bound on box coordinates times spatial_scale (feature-map pixels), far
// beyond any map (height * width < 2^31), so that box arithmetic stays finite
// in float and every position converted to an integer fits it.
constexpr double kMaxScaledCoordinate = 1 << 30;

// The largest adaptive sampling grid (along one axis), which only a bin 2^31
// pixels long reaches.
constexpr int kMaxGrid = 2147483647;

// The adaptive sampling grid for a bin `extent` pixels long: its ceiling, as
// torchvision's, clamped before the conversion to int, which is undefined out
// of range (or for NaN). However large, only the samples that can land on the
// map are visited (SampleRange in roi_sampling.h).
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE int AdaptiveGrid(A extent) {
  const A grid = std::ceil(extent);
  return grid < static_cast<A>(kMaxGrid) ? static_cast<int>(grid) : kMaxGrid;
}

// Whether a box [batch_index, x1, y1, x2, y2] passes the regular kernels'
// checks (CheckRoiValues in roi_shape names the one it fails): every
// coordinate finite and, once scaled, within kMaxScaledCoordinate; the batch
// index an integer in [0, batch). B is the boxes' type, float or double.
template <typename B>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE bool RoiOk(const B* roi, int64_t batch,
                                                 float spatial_scale) {
  for (int i = 0; i < 5; ++i) {
    if (!Eigen::numext::isfinite(roi[i])) return false;
  }
  for (int i = 1; i < 5; ++i) {
    if (Eigen::numext::abs(static_cast<double>(roi[i]) * spatial_scale) >
        kMaxScaledCoordinate) {
      return false;
    }
  }
  const B index = roi[0];
  return index == Eigen::numext::floor(index) && index >= 0 &&
         index < static_cast<B>(batch);
}

// Whether features of `dtype` take boxes of `boxes_dtype`: float boxes go with
// every feature type, double boxes with double features only, so that box
// coordinates are never computed in a type wider than the features' (the
// kernels' accumulation type, AccumulatorType, is the coordinates' type).
inline bool BoxTypesOk(TfcoDtype dtype, TfcoDtype boxes_dtype) {
  return boxes_dtype == TFCO_FLOAT ||
         (boxes_dtype == TFCO_DOUBLE && dtype == TFCO_DOUBLE);
}

// What the GPU lowering under XLA, which cannot raise, pools in place of a box
// that fails RoiOk: a point four pixels above and left of image 0's map, which
// every RoI kernel pools to zeros (argmax -1) and gives no gradient, as the
// HLO lowering treats such a box.
template <typename B>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void NullBox(float spatial_scale,
                                                   B* roi) {
  roi[0] = 0;
  for (int i = 1; i < 5; ++i) roi[i] = static_cast<B>(-4 / spatial_scale);
}

// Element offsets of a 4-D tensor in NHWC or NCHW layout, as strides of the
// logical (n, h, w, c) indices. Kernels index through this, so one code path
// serves both layouts with the same arithmetic order, and so the same numbers.
struct Layout {
  int64_t n_stride;
  int64_t h_stride;
  int64_t w_stride;
  int64_t c_stride;

  static Layout Make(bool nchw, int64_t height, int64_t width,
                     int64_t channels) {
    if (nchw) {
      return Layout{channels * height * width, width, 1, height * width};
    }
    return Layout{height * width * channels, width * channels, channels, 1};
  }

  EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE int64_t Offset(int64_t n, int64_t h,
                                                       int64_t w,
                                                       int64_t c) const {
    return n * n_stride + h * h_stride + w * w_stride + c * c_stride;
  }
};

// The four RoI ops; each gradient op has its forward op's kind.
enum class RoiKind { kPool, kAlign, kPsPool, kPsAlign };

// Attributes of a RoI op and its gradient, read once when the kernel is
// built.
struct RoiAttrs {
  RoiKind kind = RoiKind::kPool;
  int pooled_height = 0;
  int pooled_width = 0;
  float spatial_scale = 1.0f;
  int sampling_ratio = 0;  // bilinear kinds only
  bool aligned = false;    // bilinear kinds only
  bool nchw = false;

  EIGEN_DEVICE_FUNC bool position_sensitive() const {
    return kind == RoiKind::kPsPool || kind == RoiKind::kPsAlign;
  }
  // Bilinear sampling (RoiAlign, PsRoiAlign) rather than whole-pixel bins.
  EIGEN_DEVICE_FUNC bool bilinear() const {
    return kind == RoiKind::kAlign || kind == RoiKind::kPsAlign;
  }
  EIGEN_DEVICE_FUNC int64_t bins() const {
    return static_cast<int64_t>(pooled_height) * pooled_width;
  }
};

// Sizes of the tensors of one call, shared by a forward op and its gradient.
struct RoiShape {
  int64_t batch;
  int64_t height;
  int64_t width;
  int64_t channels;  // of the feature map
  int64_t num_rois;
  int64_t out_channels;  // channels / (pooled_height * pooled_width) for PS ops
};

// Everything a functor needs to know about a call: validated sizes, attrs,
// and the layouts the feature map and the pooled tensor are read or written
// in.
struct RoiArgs {
  RoiAttrs attrs;
  RoiShape shape;
  Layout features_layout;
  Layout pooled_layout;

  // The layouts of tensors in the attrs' data format.
  static RoiArgs Make(const RoiShape& shape, const RoiAttrs& attrs) {
    return RoiArgs{
        attrs, shape,
        Layout::Make(attrs.nchw, shape.height, shape.width, shape.channels),
        Layout::Make(attrs.nchw, attrs.pooled_height, attrs.pooled_width,
                     shape.out_channels)};
  }
};

// The four corner offsets (h * h_stride + w * w_stride) and weights of one
// bilinear sample; `valid` is false for points more than one pixel outside
// the map, which contribute nothing. O is the offset type: GPU kernels use
// int32_t where a feature map's offsets fit it, which saves registers.
template <typename A, typename O = int64_t>
struct BilinearSample {
  bool valid;
  O offset[4];
  A weight[4];
  // The interpolation fractions, and whether the point moves the weights
  // along each axis (it does not where it is clamped to the border): what the
  // box gradient differentiates.
  A ly, lx;
  bool y_moves, x_moves;
};

// Bilinear interpolation as torchvision's RoIAlign defines it: points up to
// one pixel outside the map are clamped to the border, farther ones are
// dropped.
template <typename A, typename O = int64_t>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE BilinearSample<A, O> Bilinear(
    A y, A x, int64_t height, int64_t width, const Layout& layout) {
  BilinearSample<A, O> s;
  if (y < A(-1) || y > A(height) || x < A(-1) || x > A(width) || height <= 0 ||
      width <= 0) {
    s.valid = false;
    return s;
  }
  s.valid = true;
  s.y_moves = y > A(0);
  s.x_moves = x > A(0);
  if (y <= A(0)) y = A(0);
  if (x <= A(0)) x = A(0);
  O y_low = static_cast<O>(y);
  O x_low = static_cast<O>(x);
  O y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = static_cast<O>(height - 1);
    y = A(y_low);
    s.y_moves = false;
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = static_cast<O>(width - 1);
    x = A(x_low);
    s.x_moves = false;
  } else {
    x_high = x_low + 1;
  }
  const A ly = y - A(y_low);
  const A lx = x - A(x_low);
  const A hy = A(1) - ly;
  const A hx = A(1) - lx;
  s.ly = ly;
  s.lx = lx;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  const O h_stride = static_cast<O>(layout.h_stride);
  const O w_stride = static_cast<O>(layout.w_stride);
  s.offset[0] = y_low * h_stride + x_low * w_stride;
  s.offset[1] = y_low * h_stride + x_high * w_stride;
  s.offset[2] = y_high * h_stride + x_low * w_stride;
  s.offset[3] = y_high * h_stride + x_high * w_stride;
  return s;
}

// Geometry of one box for the align ops, in feature-map coordinates.
template <typename A>
struct AlignBox {
  A start_h;
  A start_w;
  A bin_h;
  A bin_w;
  int grid_h;  // sampling points per bin, vertically
  int grid_w;
  // Whether RoiAlign's legacy floor of one pixel fixed the box's extent,
  // which then no longer depends on its far edge.
  bool floored_h;
  bool floored_w;
};

// The geometry of `roi` for the bilinear kinds. RoiAlign with aligned=false
// keeps the legacy "at least 1x1" box; PsRoiAlign never enlarges boxes. Both
// shift by half a pixel when aligned. A sampling_ratio <= 0 asks for the
// adaptive grid. The boxes' type B is never wider than A: double boxes come
// with double features only.
template <typename A, typename B>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE AlignBox<A> MakeAlignBox(
    const RoiAttrs& attrs, const B* roi) {
  const A offset = attrs.aligned ? A(0.5) : A(0);
  const A scale = static_cast<A>(attrs.spatial_scale);
  AlignBox<A> box;
  box.start_w = static_cast<A>(roi[1]) * scale - offset;
  box.start_h = static_cast<A>(roi[2]) * scale - offset;
  A roi_w = static_cast<A>(roi[3]) * scale - offset - box.start_w;
  A roi_h = static_cast<A>(roi[4]) * scale - offset - box.start_h;
  const bool floor = !attrs.position_sensitive() && !attrs.aligned;
  box.floored_w = floor && !(roi_w > A(1));
  box.floored_h = floor && !(roi_h > A(1));
  if (box.floored_w) roi_w = A(1);
  if (box.floored_h) roi_h = A(1);
  box.bin_h = roi_h / static_cast<A>(attrs.pooled_height);
  box.bin_w = roi_w / static_cast<A>(attrs.pooled_width);
  box.grid_h = attrs.sampling_ratio > 0
                   ? attrs.sampling_ratio
                   : AdaptiveGrid<A>(roi_h / attrs.pooled_height);
  box.grid_w = attrs.sampling_ratio > 0
                   ? attrs.sampling_ratio
                   : AdaptiveGrid<A>(roi_w / attrs.pooled_width);
  return box;
}

// Integer bin bounds [start, end) of the pooling ops along one axis.
struct BinRange {
  int64_t start;
  int64_t end;
};

// torchvision's RoIPool rounds the box to whole pixels (half away from zero),
// counts the end pixel as inside (+1) and clips bins to [0, size]. PsRoIPool
// does not count the end pixel and clips to [0, size - 1]. A is the type
// torchvision computes the bin size in; B, the boxes' type, is never wider.
template <typename A, typename B>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE BinRange
PoolBin(B roi_start, B roi_end, float spatial_scale, int bin, int bins,
        int64_t size, bool position_sensitive) {
  const A scale = static_cast<A>(spatial_scale);
  const int64_t start =
      static_cast<int64_t>(std::round(static_cast<A>(roi_start) * scale));
  const int64_t end =
      static_cast<int64_t>(std::round(static_cast<A>(roi_end) * scale));
  int64_t extent = end - start + (position_sensitive ? 0 : 1);
  if (extent < 1) extent = 1;
  const A bin_size = static_cast<A>(extent) / static_cast<A>(bins);
  int64_t lo = static_cast<int64_t>(std::floor(static_cast<A>(bin) * bin_size));
  int64_t hi =
      static_cast<int64_t>(std::ceil(static_cast<A>(bin + 1) * bin_size));
  lo += start;
  hi += start;
  const int64_t limit = position_sensitive ? size - 1 : size;
  lo = lo < 0 ? 0 : (lo > limit ? limit : lo);
  hi = hi < 0 ? 0 : (hi > limit ? limit : hi);
  return BinRange{lo, hi};
}

// Input channel read by output channel `c` of bin (ph, pw) in the
// position-sensitive ops.
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE int64_t PsChannel(int64_t c, int ph,
                                                        int pw,
                                                        int pooled_height,
                                                        int pooled_width) {
  return (c * pooled_height + ph) * pooled_width + pw;
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GEOMETRY_H_
