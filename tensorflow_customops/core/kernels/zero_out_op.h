#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ZERO_OUT_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ZERO_OUT_OP_H_

#include "tensorflow/core/framework/tensor_types.h"

namespace tensorflow {
namespace customops {
namespace functor {

// Writes input(i) to output(i) for i < keep and zero to every other element.
// Shared by the CPU kernel (zero_out_op.cc) and the GPU kernel
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

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ZERO_OUT_OP_H_
