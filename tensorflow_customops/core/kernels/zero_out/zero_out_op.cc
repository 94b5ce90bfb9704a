// The OpKernels of CustomOps>ZeroOut, which run the portable kernels'
// TfcoZeroOut (zero_out_op_entry.cc).

#include "tensorflow_customops/core/kernels/zero_out/zero_out_op.h"

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

template <typename Device, typename T>
class ZeroOutOp : public OpKernel {
 public:
  explicit ZeroOutOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("keep", &keep_));
    OP_REQUIRES(context, keep_ >= 0,
                errors::InvalidArgument("keep must be >= 0, got ", keep_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output(
                                {0}, 0, input.shape(), &output));
    if (input.NumElements() == 0) return;
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(context, CoreStatus(TfcoZeroOut(
                                device.get(), CoreDtype<T>(), input.data(),
                                output->data(), input.NumElements(), keep_)));
  }

 private:
  int64_t keep_;
};

#define REGISTER_CPU(T)                                                    \
  TFCO_REGISTER_KERNEL_BUILDER(                                            \
      Name("CustomOps>ZeroOut").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
      ZeroOutOp<CPUDevice, T>);
TF_CALL_int32(REGISTER_CPU);
TF_CALL_int64(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_int8(REGISTER_CPU);
TF_CALL_uint8(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

// int32 tensors live in host memory on GPU devices by TensorFlow convention,
// so the int32 GPU kernel runs the CPU functor on host memory.
TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>ZeroOut")
                                 .Device(DEVICE_GPU)
                                 .HostMemory("to_zero")
                                 .HostMemory("zeroed")
                                 .TypeConstraint<int32>("T"),
                             ZeroOutOp<CPUDevice, int32>);

#define REGISTER_GPU(T)                                                    \
  TFCO_REGISTER_KERNEL_BUILDER(                                            \
      Name("CustomOps>ZeroOut").Device(DEVICE_GPU).TypeConstraint<T>("T"), \
      ZeroOutOp<GPUDevice, T>);
TF_CALL_int64(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_int8(REGISTER_GPU);
TF_CALL_uint8(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
