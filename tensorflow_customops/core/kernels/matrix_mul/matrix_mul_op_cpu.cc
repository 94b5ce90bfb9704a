// CPU kernel of CustomOps>MatrixMul.

#include <functional>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm.h"
#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_op.h"

namespace tensorflow {
namespace customops {

namespace functor {

// Contracts the inner dimension of op(a) with that of op(b); Eigen's
// thread-pool contraction blocks and parallelises the work and never
// materialises a transpose.
template <typename T>
void EigenMatrixMul(const CPUDevice& d, typename TTypes<T>::ConstMatrix a,
                    typename TTypes<T>::ConstMatrix b, bool transpose_a,
                    bool transpose_b, typename TTypes<T>::Matrix product) {
  // Eigen leaves the output unwritten when the inner dimension is empty.
  if (a.dimension(transpose_a ? 0 : 1) == 0) {
    product.device(d.eigen()) = product.constant(T(0));
    return;
  }
  Eigen::array<Eigen::IndexPair<Eigen::DenseIndex>, 1> inner;
  inner[0] = Eigen::IndexPair<Eigen::DenseIndex>(transpose_a ? 0 : 1,
                                                 transpose_b ? 1 : 0);
  product.device(d.eigen()) = a.contract(b, inner);
}

// float32 runs the AVX-512 or AVX2 GEMM of matrix_mul_cpu_gemm.h where the CPU
// has it (Eigen's contraction here is compiled for baseline x86-64), on the
// same thread pool.
template <>
struct MatrixMul<CPUDevice, float> {
  void operator()(const CPUDevice& d, TTypes<float>::ConstMatrix a,
                  TTypes<float>::ConstMatrix b, bool transpose_a,
                  bool transpose_b, TTypes<float>::Matrix product);
};

// Defined out of line, so that it is not inline: the entry point
// (matrix_mul_op_entry.cc) calls it from another file.
void MatrixMul<CPUDevice, float>::operator()(const CPUDevice& d,
                                             TTypes<float>::ConstMatrix a,
                                             TTypes<float>::ConstMatrix b,
                                             bool transpose_a, bool transpose_b,
                                             TTypes<float>::Matrix product) {
  const matrix_mul_cpu::Isa isa = matrix_mul_cpu::SelectedIsa();
  const int64_t m = product.dimension(0);
  const int64_t n = product.dimension(1);
  const int64_t k = a.dimension(transpose_a ? 0 : 1);
  if (isa != matrix_mul_cpu::Isa::kBaseline && k > 0) {
    // Scratch for packed copies of a and b where this product packs them.
    const int64_t workspace_floats = matrix_mul_cpu::GemmWorkspaceSize(
        isa, transpose_a, transpose_b, m, n, k);
    const matrix_mul_cpu::Workspace workspace(workspace_floats);
    if (workspace_floats == 0 || workspace.data() != nullptr) {
      matrix_mul_cpu::Gemm(
          isa, transpose_a, transpose_b, m, n, k, a.data(), b.data(),
          product.data(), workspace.data(), d.numThreads(),
          [&d](int64_t units, double cost_per_unit,
               const std::function<void(int64_t, int64_t)>& fn) {
            d.parallelFor(units, Eigen::TensorOpCost(0, 0, cost_per_unit), fn);
          });
      return;
    }
  }
  EigenMatrixMul<float>(d, a, b, transpose_a, transpose_b, product);
}

// half and bfloat16 are widened to float and multiplied by the float kernel,
// so products accumulate in float and round once, as on GPU (Eigen's
// contraction would accumulate in T's 11 or 8 significant bits, and in an
// order that depends on the thread count); double uses Eigen's contraction.
template <typename T>
struct MatrixMul<CPUDevice, T> {
  void operator()(const CPUDevice& d, typename TTypes<T>::ConstMatrix a,
                  typename TTypes<T>::ConstMatrix b, bool transpose_a,
                  bool transpose_b, typename TTypes<T>::Matrix product) {
    if constexpr (std::is_same<T, double>::value) {
      EigenMatrixMul<T>(d, a, b, transpose_a, transpose_b, product);
    } else {
      // Aligned as TensorFlow's buffers are: the maps below assume it.
      typedef std::vector<float, Eigen::aligned_allocator<float>> Buffer;
      Buffer a32(a.size()), b32(b.size()), product32(product.size());
      TTypes<float>::Matrix(a32.data(), a.dimensions()).device(d.eigen()) =
          a.template cast<float>();
      TTypes<float>::Matrix(b32.data(), b.dimensions()).device(d.eigen()) =
          b.template cast<float>();
      TTypes<float>::Matrix wide_product(product32.data(),
                                         product.dimensions());
      MatrixMul<CPUDevice, float>()(
          d, TTypes<float>::ConstMatrix(a32.data(), a.dimensions()),
          TTypes<float>::ConstMatrix(b32.data(), b.dimensions()), transpose_a,
          transpose_b, wide_product);
      product.device(d.eigen()) = wide_product.template cast<T>();
    }
  }
};

template struct MatrixMul<CPUDevice, Eigen::half>;
template struct MatrixMul<CPUDevice, Eigen::bfloat16>;
template struct MatrixMul<CPUDevice, double>;

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
