// The portable kernels' entry points of CustomOps>RoiAlign and
// CustomOps>PsRoiAlign (and their gradients): they pick the CPU or the GPU
// functor (roi_align_op_cpu.cc, roi_align_op_gpu.cu.cc) by the device.

#include <type_traits>

#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_cpu_loops.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace {

struct AlignForward {
  template <typename Device, typename T, typename B>
  static void Run(const Device& d, const RoiArgs& args, const void* features,
                  const void* rois, void* pooled) {
    ReadFeaturesChannelsLast(d, args, static_cast<const T*>(features),
                             [&](const RoiArgs& a, const T* x) {
                               functor::RoiAlign<Device, T, B>()(
                                   d, a, x, static_cast<const B*>(rois),
                                   static_cast<T*>(pooled));
                             });
  }
};

struct AlignBackward {
  template <typename Device, typename T, typename B>
  static void Run(const Device& d, const RoiArgs& args, const void* grads,
                  const void* rois, void* grad_features) {
    functor::RoiAlignGrad<Device, T, B>()(
        d, BackwardArgs(d, args), static_cast<const T*>(grads),
        static_cast<const B*>(rois), static_cast<T*>(grad_features));
  }
};

struct AlignBoxGradient {
  template <typename Device, typename T, typename B>
  static void Run(const Device& d, const RoiArgs& args, const void* grads,
                  const void* features, const void* rois, void* grad_rois) {
    ReadFeaturesChannelsLast(d, args, static_cast<const T*>(features),
                             [&](const RoiArgs& a, const T* x) {
                               functor::RoiAlignGradBoxes<Device, T, B>()(
                                   d, a, static_cast<const T*>(grads), x,
                                   static_cast<const B*>(rois),
                                   static_cast<B*>(grad_rois));
                             });
  }
};

}  // namespace
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

namespace roi = tensorflow::customops::roi;

extern "C" TfcoError TfcoRoiAlign(const TfcoDevice* device, TfcoDtype dtype,
                                  TfcoDtype boxes_dtype,
                                  const roi::RoiArgs* args,
                                  const void* features, const void* rois,
                                  void* pooled, int32_t* /*argmax*/) {
  return roi::RunRoiKernel<roi::AlignForward>(device, dtype, boxes_dtype, *args,
                                              features, rois, pooled);
}

extern "C" TfcoError TfcoRoiAlignGrad(const TfcoDevice* device, TfcoDtype dtype,
                                      TfcoDtype boxes_dtype,
                                      const roi::RoiArgs* args,
                                      const void* grads, const void* rois,
                                      const int32_t* /*argmax*/,
                                      void* grad_features) {
  return roi::RunRoiKernel<roi::AlignBackward>(
      device, dtype, boxes_dtype, *args, grads, rois, grad_features);
}

extern "C" TfcoError TfcoRoiAlignGradBoxes(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const roi::RoiArgs* args, const void* grads, const void* features,
    const void* rois, void* grad_rois) {
  return roi::RunRoiKernel<roi::AlignBoxGradient>(
      device, dtype, boxes_dtype, *args, grads, features, rois, grad_rois);
}

extern "C" TfcoError TfcoRoiCheckBoxes(const TfcoDevice* device,
                                       TfcoDtype boxes_dtype, int64_t num_rois,
                                       int64_t batch, float spatial_scale,
                                       const void* rois, void* checked) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunOnDevice("RoiCheckBoxes", device, [&](const auto& d) {
    if constexpr (std::is_same<std::decay_t<decltype(d)>, GPUDevice>::value) {
      auto check = [&](auto b) {
        typedef decltype(b) B;
        functor::CheckBoxesGpu(d, num_rois, batch, spatial_scale,
                               static_cast<const B*>(rois),
                               static_cast<B*>(checked));
      };
      if (!ForDtype(TypeList<float, double>(), boxes_dtype, check)) {
        NoKernelFor("RoiCheckBoxes", boxes_dtype);
      }
    } else {
      // The CPU kernels' callers check boxes on the host, and raise.
      RecordError("RoiCheckBoxes: the device is not a GPU");
    }
  });
}
