// CPU kernel of CustomOps>MatrixMul, and GPU kernel registration.

#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include "tensorflow_customops/core/kernels/matrix_mul_op.h"

#include <functional>
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/core/kernels/matrix_mul_cpu_gemm.h"
#include "tensorflow_customops/core/kernels/matrix_mul_shape.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

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
    product.device(d) = product.constant(T(0));
    return;
  }
  Eigen::array<Eigen::IndexPair<Eigen::DenseIndex>, 1> inner;
  inner[0] = Eigen::IndexPair<Eigen::DenseIndex>(transpose_a ? 0 : 1,
                                                 transpose_b ? 1 : 0);
  product.device(d) = a.contract(b, inner);
}

// float32 runs the AVX-512 or AVX2 GEMM of matrix_mul_cpu_gemm.h where the CPU
// has it (Eigen's contraction here is compiled for baseline x86-64), on the
// same thread pool.
template <>
struct MatrixMul<CPUDevice, float> {
  void operator()(const CPUDevice& d, TTypes<float>::ConstMatrix a,
                  TTypes<float>::ConstMatrix b, bool transpose_a,
                  bool transpose_b, TTypes<float>::Matrix product) {
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
              d.parallelFor(units, Eigen::TensorOpCost(0, 0, cost_per_unit),
                            fn);
            });
        return;
      }
    }
    EigenMatrixMul<float>(d, a, b, transpose_a, transpose_b, product);
  }
};

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
      TTypes<float>::Matrix(a32.data(), a.dimensions()).device(d) =
          a.template cast<float>();
      TTypes<float>::Matrix(b32.data(), b.dimensions()).device(d) =
          b.template cast<float>();
      TTypes<float>::Matrix wide_product(product32.data(),
                                         product.dimensions());
      MatrixMul<CPUDevice, float>()(
          d, TTypes<float>::ConstMatrix(a32.data(), a.dimensions()),
          TTypes<float>::ConstMatrix(b32.data(), b.dimensions()), transpose_a,
          transpose_b, wide_product);
      product.device(d) = wide_product.template cast<T>();
    }
  }
};

}  // namespace functor

template <typename Device, typename T>
class MatrixMulOp : public OpKernel {
 public:
  explicit MatrixMulOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("transpose_a", &transpose_a_));
    OP_REQUIRES_OK(context, context->GetAttr("transpose_b", &transpose_b_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& a = context->input(0);
    const Tensor& b = context->input(1);
    TensorShape product_shape;
    OP_REQUIRES_OK(context,
                   MatrixMulProductShape(a.shape(), b.shape(), transpose_a_,
                                         transpose_b_, &product_shape));
    Tensor* product = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(0, product_shape, &product));
    if (product->NumElements() == 0) return;
    functor::MatrixMul<Device, T>()(context->eigen_device<Device>(),
                                    a.matrix<T>(), b.matrix<T>(), transpose_a_,
                                    transpose_b_, product->matrix<T>());
  }

 private:
  bool transpose_a_;
  bool transpose_b_;
};

#define REGISTER_CPU(T)                                                      \
  REGISTER_KERNEL_BUILDER(                                                   \
      Name("CustomOps>MatrixMul").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
      MatrixMulOp<CPUDevice, T>);
TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

namespace functor {
#define DECLARE_GPU_SPEC(T) extern template struct MatrixMul<GPUDevice, T>;
TF_CALL_half(DECLARE_GPU_SPEC);
TF_CALL_bfloat16(DECLARE_GPU_SPEC);
TF_CALL_float(DECLARE_GPU_SPEC);
TF_CALL_double(DECLARE_GPU_SPEC);
#undef DECLARE_GPU_SPEC
}  // namespace functor

#define REGISTER_GPU(T)                                                      \
  REGISTER_KERNEL_BUILDER(                                                   \
      Name("CustomOps>MatrixMul").Device(DEVICE_GPU).TypeConstraint<T>("T"), \
      MatrixMulOp<GPUDevice, T>);
TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
