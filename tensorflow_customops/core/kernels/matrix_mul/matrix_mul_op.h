// CustomOps>MatrixMul in the portable kernels: its entry point, for the
// OpKernels (matrix_mul_op.cc), and, for the core's own sources, its functor.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

// product = op(a) * op(b) for a [a_rows, a_cols] and b [b_rows, b_cols] of
// a floating-point `dtype`, op transposing where its flag is set; the caller
// has checked the shapes and that the product is not empty.
extern "C" TFCO_CORE_API TfcoError
TfcoMatrixMul(const TfcoDevice* device, TfcoDtype dtype, const void* a,
              int64_t a_rows, int64_t a_cols, const void* b, int64_t b_rows,
              int64_t b_cols, int transpose_a, int transpose_b, void* product);

#ifdef TFCO_PORTABLE
#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace functor {

// product = op(a) * op(b), where op transposes when its flag is set. Shared by
// the CPU kernel (matrix_mul_op_cpu.cc) and the GPU kernel
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
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_OP_H_
