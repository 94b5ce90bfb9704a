// CustomOps>RoiPool and CustomOps>PsRoiPool, and their gradients, in the
// portable kernels: the entry points, for the OpKernels (roi_pool_op.cc), and,
// for the core's own sources, the functors and their bin geometry.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

// pooled = RoiPool(features, rois), with argmax its second output, or
// PsRoiPool (argmax null) as args->attrs.kind says, for a floating-point
// `dtype`. `args` is validated, the pooled tensor is not empty, and `rois`
// ([K, 5], validated) is in the device's memory, of `boxes_dtype` as
// TfcoRoiAlign's.
extern "C" TFCO_CORE_API TfcoError TfcoRoiPool(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* features,
    const void* rois, void* pooled, int32_t* argmax);

// The feature gradient of the same kernel, fully written (not empty).
// RoiPoolGrad reads `argmax` (the pooled shape; on CPU every entry is -1 or a
// pixel of the map, on GPU other entries are skipped); PsRoiPoolGrad takes
// null.
extern "C" TFCO_CORE_API TfcoError TfcoRoiPoolGrad(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* grads,
    const void* rois, const int32_t* argmax, void* grad_features);

#ifdef TFCO_PORTABLE
#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Pixel ranges [h.start, h.end) x [w.start, w.end) of bin (ph, pw) of `roi`.
template <typename A, typename B>
EIGEN_DEVICE_FUNC EIGEN_STRONG_INLINE void PoolBins(const RoiArgs& args,
                                                    const B* roi, int ph,
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
template <typename Device, typename T, typename B>
struct RoiPool {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* features,
                  const B* rois, T* pooled, int32_t* argmax);
};

// grad_features[argmax] += grads, per channel; argmax entries of -1 (empty
// bins) are skipped. grad_features is fully written.
template <typename Device, typename T, typename B>
struct RoiPoolGrad {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, const int32_t* argmax, T* grad_features);
};

// pooled = PsRoiPool(features, rois): position-sensitive average pooling.
template <typename Device, typename T, typename B>
struct PsRoiPool {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* features,
                  const B* rois, T* pooled);
};

template <typename Device, typename T, typename B>
struct PsRoiPoolGrad {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, T* grad_features);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_POOL_OP_H_
