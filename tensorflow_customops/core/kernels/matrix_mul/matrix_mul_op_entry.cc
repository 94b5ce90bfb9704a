// The portable kernels' entry point of CustomOps>MatrixMul: it picks the CPU or
// the GPU functor (matrix_mul_op_cpu.cc, matrix_mul_op_gpu.cu.cc) by the
// device.

#include <type_traits>

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_op.h"

extern "C" TfcoError TfcoMatrixMul(const TfcoDevice* device, TfcoDtype dtype,
                                   const void* a, int64_t a_rows,
                                   int64_t a_cols, const void* b,
                                   int64_t b_rows, int64_t b_cols,
                                   int transpose_a, int transpose_b,
                                   void* product) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  const int64_t m = transpose_a ? a_cols : a_rows;
  const int64_t n = transpose_b ? b_rows : b_cols;
  return RunKernel<FloatTypes, FloatTypes>(
      "MatrixMul", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        typedef typename TTypes<T>::ConstMatrix ConstMatrix;
        functor::MatrixMul<std::decay_t<decltype(d)>, T>()(
            d, ConstMatrix(static_cast<const T*>(a), a_rows, a_cols),
            ConstMatrix(static_cast<const T*>(b), b_rows, b_cols),
            transpose_a != 0, transpose_b != 0,
            typename TTypes<T>::Matrix(static_cast<T*>(product), m, n));
      });
}
