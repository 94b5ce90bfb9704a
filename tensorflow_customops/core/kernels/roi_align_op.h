#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_

#include "tensorflow_customops/core/kernels/roi_ops_common.h"

namespace tensorflow {

// Validated sizes and attrs of one RoiAlign or PsRoiAlign call (the two share
// their kernels; `position_sensitive` selects the channel mapping).
struct RoiAlignArgs {
  roi::RoiShape shape;
  roi::Layout features_layout;
  roi::Layout pooled_layout;
  float spatial_scale;
  int sampling_ratio;
  bool aligned;
  bool position_sensitive;
};

namespace roi {

// Sampling point i of `grid` inside bin `bin`, as torchvision computes it.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE A SamplePoint(A start, int bin,
                                                    A bin_size, int i,
                                                    int grid) {
  return start + static_cast<A>(bin) * bin_size +
         static_cast<A>(i + .5f) * bin_size / static_cast<A>(grid);
}

// Stride between consecutive output channels' input channels, and the offset
// of the first, for bin (ph, pw): every channel in order for RoiAlign, one
// channel per group of pooled_height * pooled_width for PsRoiAlign.
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void BinChannels(const RoiAlignArgs& args,
                                                       int ph, int pw,
                                                       int64_t* stride,
                                                       int64_t* first) {
  const int64_t cs = args.features_layout.c_stride;
  if (args.position_sensitive) {
    *stride = static_cast<int64_t>(args.shape.pooled_height) *
              args.shape.pooled_width * cs;
    *first = PsChannel(0, ph, pw, args.shape.pooled_height,
                       args.shape.pooled_width) *
             cs;
  } else {
    *stride = cs;
    *first = 0;
  }
}

template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE AlignBox<A> BoxOf(
    const RoiAlignArgs& args, const float* roi) {
  const bool ps = args.position_sensitive;
  return MakeAlignBox<A>(roi, args.spatial_scale, args.shape.pooled_height,
                         args.shape.pooled_width, args.sampling_ratio,
                         /*half_pixel_offset=*/args.aligned,
                         /*min_size_one=*/!ps && !args.aligned);
}

// Samples averaged per bin; at least 1, so degenerate boxes give 0, not NaN.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE A SampleCount(const AlignBox<A>& box) {
  const int count = box.grid_h * box.grid_w;
  return static_cast<A>(count > 1 ? count : 1);
}

}  // namespace roi

namespace functor {

// pooled = RoiAlign(features, rois). `rois` is validated host memory [K, 5];
// on GPU it is uploaded to `rois_scratch` (device memory of K * 5 floats),
// which CPU ignores.
template <typename Device, typename T>
struct RoiAlign {
  void operator()(const Device& d, const RoiAlignArgs& args, const T* features,
                  const float* rois, float* rois_scratch, T* pooled);
};

// grad_features = d(pooled)/d(features)^T grads; grad_features is fully
// written (zeroed first).
template <typename Device, typename T>
struct RoiAlignGrad {
  void operator()(const Device& d, const RoiAlignArgs& args, const T* grads,
                  const float* rois, float* rois_scratch, T* grad_features);
};

}  // namespace functor
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_
