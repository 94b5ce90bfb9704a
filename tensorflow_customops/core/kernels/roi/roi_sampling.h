// RoiAlign's and PsRoiAlign's sampling grid, shared by their CPU and GPU
// functors (roi_align_op_cpu.cc, roi_align_op_gpu.cu.cc): where a bin's
// bilinear samples sit, which of them can land on the map, how they move
// with the box, and the channels a bin reads.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_SAMPLING_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_SAMPLING_H_

#include "tensorflow_customops/core/kernels/portable/device.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Sampling point i of `grid` inside bin `bin`, as torchvision computes it.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE A SamplePoint(A start, int bin,
                                                    A bin_size, int i,
                                                    int grid) {
  return start + static_cast<A>(bin) * bin_size +
         static_cast<A>(i + .5f) * bin_size / static_cast<A>(grid);
}

// The samples [*first, *last) of the `grid` of bin `bin` along an axis of
// `size` pixels that can land on the map (within [-1, size], Bilinear's
// range): every other sample is dropped, so skipping them changes no bit,
// and bounds a bin's work by about (2 * size + 3) samples per axis whatever
// the box's size. The bounds come from the sample positions' formula with a
// margin for its rounding, which grows with the coordinates' magnitude.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void SampleRange(A start, int bin,
                                                       A bin_size, int grid,
                                                       int64_t size, int* first,
                                                       int* last) {
  *first = 0;
  *last = grid;
  if (!(bin_size > A(0)) || grid <= 0) return;
  const A step = bin_size / static_cast<A>(grid);
  const A base = start + static_cast<A>(bin) * bin_size;
  const A magnitude =
      Eigen::numext::abs(base) + bin_size + static_cast<A>(size);
  const A margin =
      A(2) + A(16) * Eigen::NumTraits<A>::epsilon() * magnitude / step;
  // Sample i sits at base + (i + 0.5) * step.
  const A lo = (A(-1) - base) / step - A(0.5) - margin;
  const A hi = (static_cast<A>(size) - base) / step - A(0.5) + margin;
  const A end = static_cast<A>(grid);
  if (lo > A(0)) *first = lo < end ? static_cast<int>(lo) : grid;
  if (!(hi < end - A(1))) return;
  *last = hi > A(0) ? static_cast<int>(hi) + 1 : 0;
  if (*last < *first) *last = *first;
}

// Whether every sample of `box` is dropped, none landing within [-1, size]
// along one of the axes (Bilinear's range), so that the box pools to zeros
// and adds no gradient, as padding rows moved off the map do. SamplePoint
// rounds monotonically in the bin and the sample index, so the first and the
// last sample bound the others in either direction; a NaN position misses
// nothing.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE bool AxisMissesMap(A start, A bin_size,
                                                         int grid, int bins,
                                                         int64_t size) {
  if (grid <= 0 || size <= 0) return true;
  const A a = SamplePoint(start, 0, bin_size, 0, grid);
  const A b = SamplePoint(start, bins - 1, bin_size, grid - 1, grid);
  const A low = a < b ? a : b;
  const A high = a < b ? b : a;
  return high < A(-1) || low > static_cast<A>(size);
}

template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE bool MissesMap(const RoiArgs& args,
                                                     const AlignBox<A>& box) {
  return AxisMissesMap(box.start_h, box.bin_h, box.grid_h,
                       args.attrs.pooled_height, args.shape.height) ||
         AxisMissesMap(box.start_w, box.bin_w, box.grid_w,
                       args.attrs.pooled_width, args.shape.width);
}

// Calls visit(sample, iy, ix) for every bilinear sample (iy, ix) of bin
// (ph, pw) of `box` that lands on the map, in the order every pass
// accumulates them. O is the offset type (see BilinearSample).
template <typename A, typename O = int64_t, typename Visit>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void ForEachSampleAt(
    const RoiArgs& args, const AlignBox<A>& box, int ph, int pw,
    Visit&& visit) {
  int iy_first, iy_last, ix_first, ix_last;
  SampleRange(box.start_h, ph, box.bin_h, box.grid_h, args.shape.height,
              &iy_first, &iy_last);
  SampleRange(box.start_w, pw, box.bin_w, box.grid_w, args.shape.width,
              &ix_first, &ix_last);
  for (int iy = iy_first; iy < iy_last; ++iy) {
    const A y = SamplePoint(box.start_h, ph, box.bin_h, iy, box.grid_h);
    for (int ix = ix_first; ix < ix_last; ++ix) {
      const A x = SamplePoint(box.start_w, pw, box.bin_w, ix, box.grid_w);
      const BilinearSample<A, O> p = Bilinear<A, O>(
          y, x, args.shape.height, args.shape.width, args.features_layout);
      if (p.valid) visit(p, iy, ix);
    }
  }
}

// ForEachSampleAt for visitors of the sample alone.
template <typename A, typename O = int64_t, typename Visit>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void ForEachSample(const RoiArgs& args,
                                                         const AlignBox<A>& box,
                                                         int ph, int pw,
                                                         Visit&& visit) {
  ForEachSampleAt<A, O>(
      args, box, ph, pw,
      [&](const BilinearSample<A, O>& p, int, int) { visit(p); });
}

// How sample i of bin `bin` moves with the box's near and far coordinates
// along one axis (x1 and x2, or y1 and y2): the sample sits at fraction
// t = (bin + (i + 0.5) / grid) / bins of the box, so it moves by
// scale * (1 - t) and scale * t; where the one-pixel floor fixed the extent
// it moves with the near edge alone.
template <typename A>
struct AxisMotion {
  A near;
  A far;
};
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE AxisMotion<A> SampleMotion(
    A scale, bool floored, int bin, int i, int grid, int bins) {
  if (floored) return {scale, A(0)};
  const A t = (static_cast<A>(bin) +
               (static_cast<A>(i) + A(0.5)) / static_cast<A>(grid)) /
              static_cast<A>(bins);
  return {scale * (A(1) - t), scale * t};
}

// Adds g times the slopes d(value)/dy and d(value)/dx of sample p, for one
// channel whose corner values are v0..v3 (p.offset's order), to *dy and *dx;
// an axis along which the point is clamped adds nothing.
template <typename A, typename O>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void AddSlopes(
    const BilinearSample<A, O>& p, A g, A v0, A v1, A v2, A v3, A* dy, A* dx) {
  if (p.y_moves) *dy += g * ((A(1) - p.lx) * (v2 - v0) + p.lx * (v3 - v1));
  if (p.x_moves) *dx += g * ((A(1) - p.ly) * (v1 - v0) + p.ly * (v3 - v2));
}

// Stride between consecutive output channels' input channels, and the offset
// of the first, for bin (ph, pw): every channel in order for RoiAlign, one
// channel per group of pooled_height * pooled_width for PsRoiAlign.
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void BinChannels(const RoiArgs& args,
                                                       int ph, int pw,
                                                       int64_t* stride,
                                                       int64_t* first) {
  const int64_t cs = args.features_layout.c_stride;
  const RoiAttrs& a = args.attrs;
  if (a.position_sensitive()) {
    *stride = a.bins() * cs;
    *first = PsChannel(0, ph, pw, a.pooled_height, a.pooled_width) * cs;
  } else {
    *stride = cs;
    *first = 0;
  }
}

// Samples averaged per bin, on the map or not; at least 1, so degenerate
// boxes give 0, not NaN.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE A SampleCount(const AlignBox<A>& box) {
  const int64_t count = static_cast<int64_t>(box.grid_h) * box.grid_w;
  return static_cast<A>(count > 1 ? count : 1);
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_SAMPLING_H_
