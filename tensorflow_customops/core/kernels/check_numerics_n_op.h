#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_NUMERICS_N_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_NUMERICS_N_OP_H_

#include "tensorflow/core/framework/tensor_types.h"

namespace tensorflow {
namespace customops {
namespace functor {

// Bits of a tensor's flags word.
constexpr int kFoundNaN = 1;
constexpr int kFoundInf = 2;

// ORs kFoundNaN and kFoundInf into *flags (device memory, zeroed by the
// caller) for what x holds. Shared by the CPU kernel (check_numerics_n_op.cc)
// and the GPU kernel (check_numerics_n_op_gpu.cu.cc). x is not empty.
template <typename Device, typename T>
struct NumericFlags {
  void operator()(const Device& d, typename TTypes<T>::ConstFlat x, int* flags);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_NUMERICS_N_OP_H_
