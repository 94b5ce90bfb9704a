// The portable kernels' entry point of CustomOps>CheckNumericsN: it picks the
// CPU or the GPU functor (check_numerics_n_op_cpu.cc,
// check_numerics_n_op_gpu.cu.cc) by the device.

#include <cstring>
#include <type_traits>

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"

extern "C" TfcoError TfcoNumericFlags(const TfcoDevice* device, int n,
                                      const TfcoDtype* dtypes,
                                      const void* const* tensors,
                                      const int64_t* sizes, int* scratch,
                                      int* flags) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunOnDevice("CheckNumericsN", device, [&](const auto& d) {
    typedef std::decay_t<decltype(d)> Device;
    constexpr bool kOnCpu = std::is_same<Device, CPUDevice>::value;
    int* out = kOnCpu ? flags : scratch;
    if constexpr (kOnCpu) {
      std::memset(flags, 0, n * sizeof(int));
    } else {
      ZeroGpuMemory(d, scratch, n * sizeof(int));
    }
    for (int i = 0; i < n; ++i) {
      if (sizes[i] == 0) continue;
      auto check = [&](auto t) {
        typedef decltype(t) T;
        functor::NumericFlags<Device, T>()(
            d,
            typename TTypes<T>::ConstFlat(static_cast<const T*>(tensors[i]),
                                          sizes[i]),
            out + i);
      };
      if (!ForDtype(FloatTypes(), dtypes[i], check)) {
        NoKernelFor("CheckNumericsN", dtypes[i]);
        return;
      }
    }
    if constexpr (!kOnCpu) CopyToHostAsync(d, flags, scratch, n * sizeof(int));
  });
}
