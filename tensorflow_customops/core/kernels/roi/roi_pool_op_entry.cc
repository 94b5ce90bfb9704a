// The portable kernels' entry points of CustomOps>RoiPool and
// CustomOps>PsRoiPool (and their gradients): they pick the CPU or the GPU
// functor (roi_pool_op_cpu.cc, roi_pool_op_gpu.cu.cc) by the device.

#include "tensorflow_customops/core/kernels/roi/roi_cpu_loops.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace {

struct PoolForward {
  template <typename Device, typename T, typename B>
  static void Run(const Device& d, const RoiArgs& args, const void* features,
                  const void* rois, void* pooled, int32_t* argmax) {
    const B* boxes = static_cast<const B*>(rois);
    T* out = static_cast<T*>(pooled);
    ReadFeaturesChannelsLast(
        d, args, static_cast<const T*>(features),
        [&](const RoiArgs& a, const T* x) {
          if (a.attrs.kind == RoiKind::kPsPool) {
            functor::PsRoiPool<Device, T, B>()(d, a, x, boxes, out);
          } else {
            functor::RoiPool<Device, T, B>()(d, a, x, boxes, out, argmax);
          }
        });
  }
};

struct PoolBackward {
  template <typename Device, typename T, typename B>
  static void Run(const Device& d, const RoiArgs& args, const void* grads,
                  const void* rois, const int32_t* argmax,
                  void* grad_features) {
    const RoiArgs a = BackwardArgs(d, args);
    const T* g = static_cast<const T*>(grads);
    const B* boxes = static_cast<const B*>(rois);
    T* out = static_cast<T*>(grad_features);
    if (a.attrs.kind == RoiKind::kPsPool) {
      functor::PsRoiPoolGrad<Device, T, B>()(d, a, g, boxes, out);
    } else {
      functor::RoiPoolGrad<Device, T, B>()(d, a, g, boxes, argmax, out);
    }
  }
};

}  // namespace
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

namespace roi = tensorflow::customops::roi;

extern "C" TfcoError TfcoRoiPool(const TfcoDevice* device, TfcoDtype dtype,
                                 TfcoDtype boxes_dtype,
                                 const roi::RoiArgs* args, const void* features,
                                 const void* rois, void* pooled,
                                 int32_t* argmax) {
  return roi::RunRoiKernel<roi::PoolForward>(device, dtype, boxes_dtype, *args,
                                             features, rois, pooled, argmax);
}

extern "C" TfcoError TfcoRoiPoolGrad(const TfcoDevice* device, TfcoDtype dtype,
                                     TfcoDtype boxes_dtype,
                                     const roi::RoiArgs* args,
                                     const void* grads, const void* rois,
                                     const int32_t* argmax,
                                     void* grad_features) {
  return roi::RunRoiKernel<roi::PoolBackward>(
      device, dtype, boxes_dtype, *args, grads, rois, argmax, grad_features);
}
