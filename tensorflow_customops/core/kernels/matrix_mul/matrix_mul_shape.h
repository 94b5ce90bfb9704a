// MatrixMul's shape checks, shared by its kernels and its XLA lowering so
// that both reject bad shapes with the same messages.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_SHAPE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_SHAPE_H_

#include <cstdint>

#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow/core/util/overflow.h"

namespace tensorflow {
namespace customops {

// The [m, n] shape of op(a) * op(b), or an InvalidArgument naming the
// argument at fault.
inline Status MatrixMulProductShape(const TensorShape& a, const TensorShape& b,
                                    bool transpose_a, bool transpose_b,
                                    TensorShape* product) {
  if (a.dims() != 2) {
    return errors::InvalidArgument("MatrixMul: a must be a matrix, got ",
                                   "shape ", a.DebugString());
  }
  if (b.dims() != 2) {
    return errors::InvalidArgument("MatrixMul: b must be a matrix, got ",
                                   "shape ", b.DebugString());
  }
  const int64_t m = a.dim_size(transpose_a ? 1 : 0);
  const int64_t inner_a = a.dim_size(transpose_a ? 0 : 1);
  const int64_t inner_b = b.dim_size(transpose_b ? 1 : 0);
  const int64_t n = b.dim_size(transpose_b ? 0 : 1);
  if (inner_a != inner_b) {
    return errors::InvalidArgument(
        "MatrixMul: inner dimensions differ: a ", a.DebugString(),
        (transpose_a ? " (transposed)" : ""), " contributes ", inner_a, ", b ",
        b.DebugString(), (transpose_b ? " (transposed)" : ""), " contributes ",
        inner_b);
  }
  // m * n can overflow even though a and b are valid tensors: an empty inner
  // dimension lets both be huge.
  if (MultiplyWithoutOverflow(m, n) < 0) {
    return errors::InvalidArgument("MatrixMul: the product [", m, ", ", n,
                                   "]: its number of elements overflows int64");
  }
  return TensorShape::BuildTensorShape({m, n}, product);
}

}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_SHAPE_H_
