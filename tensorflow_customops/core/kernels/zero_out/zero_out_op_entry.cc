// The portable kernels' entry point of CustomOps>ZeroOut: it picks the CPU or
// the GPU functor (zero_out_op_cpu.cc, zero_out_op_gpu.cu.cc) by the device.

#include <type_traits>

#include "tensorflow_customops/core/kernels/zero_out/zero_out_op.h"

extern "C" TfcoError TfcoZeroOut(const TfcoDevice* device, TfcoDtype dtype,
                                 const void* input, void* output, int64_t size,
                                 int64_t keep) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  typedef TypeList<Eigen::half, Eigen::bfloat16, float, double, int8_t, uint8_t,
                   int64_t>
      GpuTypes;
  typedef TypeList<Eigen::half, Eigen::bfloat16, float, double, int8_t, uint8_t,
                   int32_t, int64_t>
      CpuTypes;
  return RunKernel<CpuTypes, GpuTypes>(
      "ZeroOut", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        functor::ZeroOut<std::decay_t<decltype(d)>, T>()(
            d,
            typename TTypes<T>::ConstFlat(static_cast<const T*>(input), size),
            typename TTypes<T>::Flat(static_cast<T*>(output), size), keep);
      });
}
