// CustomOps>CheckNumericsN in the portable kernels: its entry point, for the
// OpKernel (check_numerics_n_op.cc), and, for the core's own sources, its
// functor.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_NUMERICS_N_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_NUMERICS_N_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

// Bits of a tensor's flags word.
enum { TFCO_FOUND_NAN = 1, TFCO_FOUND_INF = 2 };

// Sets flags[i] (host memory) to the TFCO_FOUND_* bits of what tensors[i]
// holds, for i < n: sizes[i] elements of dtypes[i], floating point. On GPU
// the tensors are device memory, `scratch` is n ints of device memory,
// `flags` is page-locked, and the call returns without waiting: the flags
// are there once the stream has passed it (TfcoWhenStreamDone).
extern "C" TFCO_CORE_API TfcoError TfcoNumericFlags(
    const TfcoDevice* device, int n, const TfcoDtype* dtypes,
    const void* const* tensors, const int64_t* sizes, int* scratch, int* flags);

#ifdef __cplusplus
#include <string>

// The error of the first tensor whose flags are set, after the op's
// `message` attr; empty if none is. The regular kernels and the XLA custom
// call raise it.
inline std::string TfcoNumericsError(const std::string& message,
                                     const int* flags, int n) {
  for (int i = 0; i < n; ++i) {
    if (flags[i] == 0) continue;
    const char* found = flags[i] == (TFCO_FOUND_NAN | TFCO_FOUND_INF)
                            ? "NaN and Inf"
                        : flags[i] == TFCO_FOUND_NAN ? "NaN"
                                                     : "Inf";
    return message + ": CheckNumericsN found " + found + " in tensors[" +
           std::to_string(i) + "] of " + std::to_string(n);
  }
  return "";
}
#endif

#ifdef TFCO_PORTABLE
#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace functor {

// ORs TFCO_FOUND_NAN and TFCO_FOUND_INF into *flags (device memory, zeroed by
// the caller) for what x holds. Shared by the CPU kernel
// (check_numerics_n_op_cpu.cc) and the GPU kernel
// (check_numerics_n_op_gpu.cu.cc). x is not empty.
template <typename Device, typename T>
struct NumericFlags {
  void operator()(const Device& d, typename TTypes<T>::ConstFlat x, int* flags);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_NUMERICS_N_OP_H_
