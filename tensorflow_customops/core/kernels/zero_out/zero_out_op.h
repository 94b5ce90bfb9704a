// CustomOps>ZeroOut in the portable kernels: its entry point, for the OpKernels
// (zero_out_op.cc), and, for the core's own sources, its functor.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ZERO_OUT_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ZERO_OUT_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

// ZeroOut on `size` > 0 elements of `dtype` (every type but int32 on GPU).
extern "C" TFCO_CORE_API TfcoError TfcoZeroOut(const TfcoDevice* device,
                                               TfcoDtype dtype,
                                               const void* input, void* output,
                                               int64_t size, int64_t keep);

#ifdef TFCO_PORTABLE
#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace functor {

// Writes input(i) to output(i) for i < keep and zero to every other element.
// Shared by the CPU kernel (zero_out_op_cpu.cc) and the GPU kernel
// (zero_out_op_gpu.cu.cc). The caller guarantees
// input.size() == output.size() > 0 and keep >= 0.
template <typename Device, typename T>
struct ZeroOut {
  void operator()(const Device& d, typename TTypes<T>::ConstFlat input,
                  typename TTypes<T>::Flat output, int64_t keep);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ZERO_OUT_OP_H_
