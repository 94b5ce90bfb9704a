#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_OP_H_

#include "tensorflow/core/framework/tensor_types.h"

namespace tensorflow {
namespace customops {
namespace functor {

// product = op(a) * op(b), where op transposes when its flag is set. Shared by
// the CPU kernel (matrix_mul_op.cc) and the GPU kernel
// (matrix_mul_op_gpu.cu.cc). The caller has checked the shapes and that
// product is not empty; the inner dimension may be zero.
template <typename Device, typename T>
struct MatrixMul {
  void operator()(const Device& d, typename TTypes<T>::ConstMatrix a,
                  typename TTypes<T>::ConstMatrix b, bool transpose_a,
                  bool transpose_b, typename TTypes<T>::Matrix product);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_OP_H_
