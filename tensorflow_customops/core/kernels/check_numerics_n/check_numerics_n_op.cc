// The OpKernels of CustomOps>CheckNumericsN, which run the portable kernels'
// TfcoNumericFlags (check_numerics_n_op_entry.cc).

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"

#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

template <typename Device>
class CheckNumericsNOp : public OpKernel {
 public:
  explicit CheckNumericsNOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* context) override {
    const int n = context->num_inputs();
    OP_REQUIRES(context, n >= 1,
                errors::InvalidArgument(
                    "CheckNumericsN: tensors must hold at least one tensor"));
    std::vector<TfcoDtype> dtypes(n);
    std::vector<const void*> tensors(n);
    std::vector<int64_t> sizes(n);
    for (int i = 0; i < n; ++i) {
      const Tensor& x = context->input(i);
      OP_REQUIRES(context, DataTypeIsFloating(x.dtype()),
                  errors::InvalidArgument("CheckNumericsN: tensors[", i,
                                          "] has unsupported dtype ",
                                          DataTypeString(x.dtype())));
      dtypes[i] = CoreDtype(x.dtype());
      tensors[i] = x.data();
      sizes[i] = x.NumElements();
    }
    // Device memory for the flags on GPU, where the kernels write them.
    Tensor scratch;
    if (OnGpu<Device>()) {
      OP_REQUIRES_OK(context, context->allocate_temp(DT_INT32, TensorShape({n}),
                                                     &scratch));
    }
    std::vector<int> host_flags(n);
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(
        context,
        CoreStatus(TfcoNumericFlags(
            device.get(), n, dtypes.data(), tensors.data(), sizes.data(),
            OnGpu<Device>() ? scratch.flat<int>().data() : nullptr,
            host_flags.data())));
    const std::string error = TfcoNumericsError(message_, host_flags.data(), n);
    OP_REQUIRES(context, error.empty(), errors::InvalidArgument(error));
    // Valid tensors pass through without a copy.
    for (int i = 0; i < n; ++i) context->set_output(i, context->input(i));
  }

 private:
  std::string message_;
};

TFCO_REGISTER_KERNEL_BUILDER(
    Name("CustomOps>CheckNumericsN").Device(DEVICE_CPU),
    CheckNumericsNOp<CPUDevice>);

#if GOOGLE_CUDA

TFCO_REGISTER_KERNEL_BUILDER(
    Name("CustomOps>CheckNumericsN").Device(DEVICE_GPU),
    CheckNumericsNOp<GPUDevice>);

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
