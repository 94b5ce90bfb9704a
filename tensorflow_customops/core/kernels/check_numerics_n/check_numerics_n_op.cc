// The OpKernels of CustomOps>CheckNumericsN, which run the portable kernels'
// TfcoNumericFlags (check_numerics_n_op_entry.cc). On the GPU the kernel is
// an AsyncOpKernel, as TensorFlow's CheckNumerics: the flags come back to
// page-locked host memory and are read once the stream has passed them,
// without blocking (docs/gpu.md, "Checks without waiting").

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"

#include <string>
#include <vector>

#include "tensorflow/core/framework/allocator.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

namespace {

// The inputs in the core's terms, checked.
struct NumericsCall {
  int n = 0;
  std::vector<TfcoDtype> dtypes;
  std::vector<const void*> tensors;
  std::vector<int64_t> sizes;
};

Status ReadInputs(OpKernelContext* context, NumericsCall* call) {
  const int n = context->num_inputs();
  if (n < 1) {
    return errors::InvalidArgument(
        "CheckNumericsN: tensors must hold at least one tensor");
  }
  call->n = n;
  for (int i = 0; i < n; ++i) {
    const Tensor& x = context->input(i);
    if (!DataTypeIsFloating(x.dtype())) {
      return errors::InvalidArgument("CheckNumericsN: tensors[", i,
                                     "] has unsupported dtype ",
                                     DataTypeString(x.dtype()));
    }
    call->dtypes.push_back(CoreDtype(x.dtype()));
    call->tensors.push_back(x.data());
    call->sizes.push_back(x.NumElements());
  }
  return OkStatus();
}

// The op's error for the flags, or OK; valid tensors pass through without
// a copy.
Status Finish(OpKernelContext* context, const std::string& message,
              const int* flags, int n) {
  const std::string error = TfcoNumericsError(message, flags, n);
  if (!error.empty()) return errors::InvalidArgument(error);
  for (int i = 0; i < n; ++i) context->set_output(i, context->input(i));
  return OkStatus();
}

class CheckNumericsNCpuOp : public OpKernel {
 public:
  explicit CheckNumericsNCpuOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* context) override {
    NumericsCall call;
    OP_REQUIRES_OK(context, ReadInputs(context, &call));
    std::vector<int> flags(call.n);
    const CoreDevice device(context, /*on_gpu=*/false);
    OP_REQUIRES_OK(context, CoreStatus(TfcoNumericFlags(
                                device.get(), call.n, call.dtypes.data(),
                                call.tensors.data(), call.sizes.data(),
                                /*scratch=*/nullptr, flags.data())));
    OP_REQUIRES_OK(context, Finish(context, message_, flags.data(), call.n));
  }

 private:
  std::string message_;
};

TFCO_REGISTER_KERNEL_BUILDER(
    Name("CustomOps>CheckNumericsN").Device(DEVICE_CPU), CheckNumericsNCpuOp);

#if GOOGLE_CUDA

class CheckNumericsNGpuOp : public AsyncOpKernel {
 public:
  explicit CheckNumericsNGpuOp(OpKernelConstruction* context)
      : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("message", &message_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    NumericsCall call;
    OP_REQUIRES_OK_ASYNC(context, ReadInputs(context, &call), done);
    // The kernels write the flags in device memory; they come back to
    // page-locked host memory.
    AllocatorAttributes pinned;
    pinned.set_on_host(true);
    pinned.set_gpu_compatible(true);
    Tensor scratch, flags;
    const TensorShape shape({call.n});
    OP_REQUIRES_OK_ASYNC(
        context, context->allocate_temp(DT_INT32, shape, &scratch), done);
    OP_REQUIRES_OK_ASYNC(
        context, context->allocate_temp(DT_INT32, shape, &flags, pinned), done);
    const CoreDevice device(context, /*on_gpu=*/true);
    const Status launched = CoreStatus(
        TfcoNumericFlags(device.get(), call.n, call.dtypes.data(),
                         call.tensors.data(), call.sizes.data(),
                         scratch.flat<int>().data(), flags.flat<int>().data()));
    // Whatever was enqueued may still use the buffers until the stream
    // passes it, so a failure is reported there too.
    WhenGpuDone(context, [this, context, done = std::move(done), scratch, flags,
                          launched](Status stream) {
      OP_REQUIRES_OK_ASYNC(context, stream, done);
      OP_REQUIRES_OK_ASYNC(context, launched, done);
      OP_REQUIRES_OK_ASYNC(context,
                           Finish(context, message_, flags.flat<int>().data(),
                                  static_cast<int>(flags.NumElements())),
                           done);
      done();
    });
  }

 private:
  std::string message_;
};

TFCO_REGISTER_KERNEL_BUILDER(
    Name("CustomOps>CheckNumericsN").Device(DEVICE_GPU), CheckNumericsNGpuOp);

#endif  // GOOGLE_CUDA

}  // namespace

}  // namespace customops
}  // namespace tensorflow
