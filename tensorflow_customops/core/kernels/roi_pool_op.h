#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_

#include "tensorflow_customops/core/kernels/roi_ops_common.h"

namespace tensorflow {

// Validated sizes and attrs of one RoiPool or PsRoiPool call.
struct RoiPoolArgs {
  roi::RoiShape shape;
  roi::Layout features_layout;
  roi::Layout pooled_layout;
  float spatial_scale;
};

namespace roi {

// Pixel ranges [h.start, h.end) x [w.start, w.end) of bin (ph, pw) of `roi`.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void PoolBins(const RoiPoolArgs& args,
                                                    const float* roi, int ph,
                                                    int pw,
                                                    bool position_sensitive,
                                                    BinRange* h, BinRange* w) {
  const RoiShape& s = args.shape;
  *h = PoolBin<A>(roi[2], roi[4], args.spatial_scale, ph, s.pooled_height,
                  s.height, position_sensitive);
  *w = PoolBin<A>(roi[1], roi[3], args.spatial_scale, pw, s.pooled_width,
                  s.width, position_sensitive);
}

}  // namespace roi

namespace functor {

// pooled, argmax = RoiPool(features, rois). `rois` is validated host memory
// [K, 5]; on GPU it is uploaded to `rois_scratch` (K * 5 device floats).
template <typename Device, typename T>
struct RoiPool {
  void operator()(const Device& d, const RoiPoolArgs& args, const T* features,
                  const float* rois, float* rois_scratch, T* pooled,
                  int32_t* argmax);
};

// grad_features[argmax] += grads, per channel; argmax entries of -1 (empty
// bins) are skipped. grad_features is fully written.
template <typename Device, typename T>
struct RoiPoolGrad {
  void operator()(const Device& d, const RoiPoolArgs& args, const T* grads,
                  const float* rois, float* rois_scratch, const int32_t* argmax,
                  T* grad_features);
};

// pooled = PsRoiPool(features, rois): position-sensitive average pooling.
template <typename Device, typename T>
struct PsRoiPool {
  void operator()(const Device& d, const RoiPoolArgs& args, const T* features,
                  const float* rois, float* rois_scratch, T* pooled);
};

template <typename Device, typename T>
struct PsRoiPoolGrad {
  void operator()(const Device& d, const RoiPoolArgs& args, const T* grads,
                  const float* rois, float* rois_scratch, T* grad_features);
};

}  // namespace functor
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_
