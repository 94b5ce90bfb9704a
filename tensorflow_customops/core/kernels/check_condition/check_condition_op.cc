// The OpKernels of CustomOps>CheckCondition, which check the condition with
// the portable kernels' TfcoCheckCondition (check_condition_op_entry.cc) and
// pass the values through without copying them.

#include "tensorflow_customops/core/kernels/check_condition/check_condition_op.h"

#include <string>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

class CheckConditionOp : public OpKernel {
 public:
  explicit CheckConditionOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& condition = context->input(0);
    int holds = 0;
    // The condition is in host memory on every device.
    const CoreDevice device(context, /*on_gpu=*/false);
    OP_REQUIRES_OK(context, CoreStatus(TfcoCheckCondition(
                                device.get(), condition.flat<bool>().data(),
                                condition.NumElements(), &holds)));
    OP_REQUIRES(context, holds, errors::InvalidArgument(message_));
    for (int i = 1; i < context->num_inputs(); ++i) {
      context->set_output(i - 1, context->input(i));
    }
  }

 private:
  std::string message_;
};

TFCO_REGISTER_KERNEL_BUILDER(
    Name("CustomOps>CheckCondition").Device(DEVICE_CPU), CheckConditionOp);

#if GOOGLE_CUDA

// Only the condition is read, on the host: TensorFlow brings it there (one
// bool, usually) as it does Assert's inputs, and this kernel copies nothing
// and never waits for the stream. The values stay where they are (in device
// memory; int32 in host memory, as TensorFlow keeps it on GPUs) and pass
// through, where registering them in host memory too, as Assert does, would
// copy each to the host and back.
TFCO_REGISTER_KERNEL_BUILDER(
    Name("CustomOps>CheckCondition").Device(DEVICE_GPU).HostMemory("condition"),
    CheckConditionOp);

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
