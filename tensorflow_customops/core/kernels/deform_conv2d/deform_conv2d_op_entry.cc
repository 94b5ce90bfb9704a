// The portable kernels' entry points of CustomOps>DeformableConv2d and its
// gradient op: they pick the CPU or the GPU functor (deform_conv2d_op_cpu.cc,
// deform_conv2d_op_gpu.cu.cc) by the device.

#include <type_traits>

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"

extern "C" TfcoError TfcoDeformableConv2d(const TfcoDevice* device,
                                          TfcoDtype dtype,
                                          const TfcoDeformConv2dArgs* args,
                                          const void* input, const void* filter,
                                          const void* offset, const void* mask,
                                          void* output) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunKernel<FloatTypes, FloatTypes>(
      "DeformableConv2d", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        functor::DeformableConv2d<std::decay_t<decltype(d)>, T>()(
            d, *args, static_cast<const T*>(input),
            static_cast<const T*>(filter), static_cast<const T*>(offset),
            static_cast<const T*>(mask), static_cast<T*>(output));
      });
}

extern "C" TfcoError TfcoDeformableConv2dGrad(
    const TfcoDevice* device, TfcoDtype dtype, const TfcoDeformConv2dArgs* args,
    const void* input, const void* filter, const void* offset, const void* mask,
    const void* grad_output, void* grad_input, void* grad_filter,
    void* grad_offset, void* grad_mask) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunKernel<FloatTypes, FloatTypes>(
      "DeformableConv2dGrad", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        functor::DeformableConv2dGrad<std::decay_t<decltype(d)>, T>()(
            d, *args, static_cast<const T*>(input),
            static_cast<const T*>(filter), static_cast<const T*>(offset),
            static_cast<const T*>(mask), static_cast<const T*>(grad_output),
            static_cast<T*>(grad_input), static_cast<T*>(grad_filter),
            static_cast<T*>(grad_offset), static_cast<T*>(grad_mask));
      });
}
