// The portable kernels' entry points of CustomOps>RoiPool and
// CustomOps>PsRoiPool (and their gradients): they pick the CPU or the GPU
// functor (roi_pool_op_cpu.cc, roi_pool_op_gpu.cu.cc) by the device.

#include <type_traits>

#include "tensorflow_customops/core/kernels/roi/roi_cpu_loops.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

extern "C" TfcoError TfcoRoiPool(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* features,
    const void* rois, void* pooled, int32_t* argmax) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return roi::RunRoiKernel(
      roi::KindName(args->attrs.kind), device, dtype, boxes_dtype,
      [&](const auto& d, auto t, auto b) {
        typedef decltype(t) T;
        typedef decltype(b) B;
        typedef std::decay_t<decltype(d)> Device;
        const B* boxes = static_cast<const B*>(rois);
        roi::ReadFeaturesChannelsLast(
            d, *args, static_cast<const T*>(features),
            [&](const roi::RoiArgs& a, const T* x) {
              if (a.attrs.kind == roi::RoiKind::kPsPool) {
                functor::PsRoiPool<Device, T, B>()(d, a, x, boxes,
                                                   static_cast<T*>(pooled));
              } else {
                functor::RoiPool<Device, T, B>()(
                    d, a, x, boxes, static_cast<T*>(pooled), argmax);
              }
            });
      });
}

extern "C" TfcoError TfcoRoiPoolGrad(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* grads,
    const void* rois, const int32_t* argmax, void* grad_features) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return roi::RunRoiKernel(
      roi::KindName(args->attrs.kind), device, dtype, boxes_dtype,
      [&](const auto& d, auto t, auto b) {
        typedef decltype(t) T;
        typedef decltype(b) B;
        typedef std::decay_t<decltype(d)> Device;
        const roi::RoiArgs a = roi::BackwardArgs(d, *args);
        const T* g = static_cast<const T*>(grads);
        const B* boxes = static_cast<const B*>(rois);
        T* out = static_cast<T*>(grad_features);
        if (a.attrs.kind == roi::RoiKind::kPsPool) {
          functor::PsRoiPoolGrad<Device, T, B>()(d, a, g, boxes, out);
        } else {
          functor::RoiPoolGrad<Device, T, B>()(d, a, g, boxes, argmax, out);
        }
      });
}
