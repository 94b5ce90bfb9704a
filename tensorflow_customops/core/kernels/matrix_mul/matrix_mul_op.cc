// The OpKernels of CustomOps>MatrixMul, which run the portable kernels'
// TfcoMatrixMul (matrix_mul_op_entry.cc).

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_op.h"

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"
#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_shape.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

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
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(context,
                   CoreStatus(TfcoMatrixMul(
                       device.get(), CoreDtype<T>(), a.data(), a.dim_size(0),
                       a.dim_size(1), b.data(), b.dim_size(0), b.dim_size(1),
                       transpose_a_, transpose_b_, product->data())));
  }

 private:
  bool transpose_a_;
  bool transpose_b_;
};

#define REGISTER_CPU(T)                                                      \
  TFCO_REGISTER_KERNEL_BUILDER(                                              \
      Name("CustomOps>MatrixMul").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
      MatrixMulOp<CPUDevice, T>);
TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

#define REGISTER_GPU(T)                                                      \
  TFCO_REGISTER_KERNEL_BUILDER(                                              \
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
