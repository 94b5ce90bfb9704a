#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_

#include "tensorflow_customops/core/kernels/roi_ops_common.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Pixel ranges [h.start, h.end) x [w.start, w.end) of bin (ph, pw) of `roi`.
template <typename A>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void PoolBins(const RoiArgs& args,
                                                    const float* roi, int ph,
                                                    int pw, BinRange* h,
                                                    BinRange* w) {
  const RoiAttrs& a = args.attrs;
  const bool ps = a.position_sensitive();
  *h = PoolBin<A>(roi[2], roi[4], a.spatial_scale, ph, a.pooled_height,
                  args.shape.height, ps);
  *w = PoolBin<A>(roi[1], roi[3], a.spatial_scale, pw, a.pooled_width,
                  args.shape.width, ps);
}

}  // namespace roi

namespace functor {

// pooled, argmax = RoiPool(features, rois). `rois` is validated [K, 5] in the
// device's memory.
template <typename Device, typename T>
struct RoiPool {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* features,
                  const float* rois, T* pooled, int32_t* argmax);
};

// grad_features[argmax] += grads, per channel; argmax entries of -1 (empty
// bins) are skipped. grad_features is fully written.
template <typename Device, typename T>
struct RoiPoolGrad {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const float* rois, const int32_t* argmax, T* grad_features);
};

// pooled = PsRoiPool(features, rois): position-sensitive average pooling.
template <typename Device, typename T>
struct PsRoiPool {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* features,
                  const float* rois, T* pooled);
};

template <typename Device, typename T>
struct PsRoiPoolGrad {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const float* rois, T* grad_features);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_
