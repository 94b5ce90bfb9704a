// CustomOps>RoiAlign and CustomOps>PsRoiAlign, and their gradients, in the
// kernel core: the entry points, for the OpKernels (roi_align_op.cc), and,
// for the core's own sources, the functors and their shared geometry.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

// pooled = RoiAlign(features, rois), or PsRoiAlign as args->attrs.kind says,
// for a floating-point `dtype`. `args` is validated, the pooled tensor is not
// empty, and `rois` ([K, 5], validated) is in the device's memory. The boxes'
// type `boxes_dtype` is TFCO_FLOAT, or TFCO_DOUBLE with double features
// (roi::BoxTypesOk); the box geometry is computed in the wider of the two.
extern "C" TFCO_CORE_API TfcoError
TfcoRoiAlign(const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
             const tensorflow::customops::roi::RoiArgs* args,
             const void* features, const void* rois, void* pooled);

// grad_features = d(pooled)/d(features)^T grads of the same kernel; the
// feature gradient is not empty, and is fully written.
extern "C" TFCO_CORE_API TfcoError TfcoRoiAlignGrad(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* grads,
    const void* rois, void* grad_features);

// grad_rois = d(pooled)/d(rois)^T grads of the same kernel at its sampling
// grid (the grid does not move with the box), as CropAndResize's box
// gradient: [K, 5] in the boxes' type, column 0 (the batch index) zero.
// `features` is the forward's input; grad_rois is in host memory on CPU,
// device memory on GPU.
extern "C" TFCO_CORE_API TfcoError TfcoRoiAlignGradBoxes(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* grads,
    const void* features, const void* rois, void* grad_rois);

// checked = rois ([num_rois, 5], device memory) with every box that fails
// roi::RoiOk replaced by roi::NullBox, enqueued on the GPU stream: what the
// XLA GPU lowering pools, since it cannot raise on data or read it on the
// host. Serves every RoI kind, boxes of `boxes_dtype` (float or double). GPU
// only.
extern "C" TFCO_CORE_API TfcoError TfcoRoiCheckBoxes(
    const TfcoDevice* device, TfcoDtype boxes_dtype, int64_t num_rois,
    int64_t batch, float spatial_scale, const void* rois, void* checked);

#ifdef TFCO_PORTABLE
#include "tensorflow_customops/core/kernels/portable/device.h"

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

namespace functor {

// pooled = RoiAlign(features, rois), or PsRoiAlign as args.attrs.kind says.
// `rois` is validated [K, 5] in the device's memory, of type B (float, or
// double with double T). Shared by the CPU kernel (roi_align_op_cpu.cc) and
// the GPU kernel (roi_align_op_gpu.cu.cc).
template <typename Device, typename T, typename B>
struct RoiAlign {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* features,
                  const B* rois, T* pooled);
};

// grad_features = d(pooled)/d(features)^T grads; grad_features is fully
// written (zeroed first).
template <typename Device, typename T, typename B>
struct RoiAlignGrad {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, T* grad_features);
};

// grad_rois = d(pooled)/d(rois)^T grads (TfcoRoiAlignGradBoxes); every
// element is written.
template <typename Device, typename T, typename B>
struct RoiAlignGradBoxes {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const T* features, const B* rois, B* grad_rois);
};

// TfcoRoiCheckBoxes on the GPU (roi_align_op_gpu.cu.cc).
template <typename B>
void CheckBoxesGpu(const GPUDevice& d, int64_t num_rois, int64_t batch,
                   float spatial_scale, const B* rois, B* checked);

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_
