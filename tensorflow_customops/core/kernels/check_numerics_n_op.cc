// CPU kernel of CustomOps>CheckNumericsN, and GPU kernel registration.

#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include "tensorflow_customops/core/kernels/check_numerics_n_op.h"

#include <atomic>
#include <string>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace functor {

template <typename T>
struct NumericFlags<CPUDevice, T> {
  void operator()(const CPUDevice& d, typename TTypes<T>::ConstFlat x,
                  int* flags) {
    // OR is order-independent, so the result does not depend on how the
    // shards are split.
    std::atomic<int> found{0};
    d.parallelFor(x.size(), Eigen::TensorOpCost(sizeof(T), 0, 2),
                  [&x, &found](Eigen::Index begin, Eigen::Index end) {
                    int local = 0;
                    for (Eigen::Index j = begin; j < end; ++j) {
                      if (Eigen::numext::isnan(x(j))) local |= kFoundNaN;
                      if (Eigen::numext::isinf(x(j))) local |= kFoundInf;
                    }
                    found.fetch_or(local);
                  });
    *flags |= found.load();
  }
};

}  // namespace functor

namespace {

void WaitFor(const CPUDevice&) {}
#if GOOGLE_CUDA
void WaitFor(const GPUDevice& d) { d.synchronize(); }
#endif

std::string Describe(int flags) {
  if (flags == (functor::kFoundNaN | functor::kFoundInf)) return "NaN and Inf";
  return flags == functor::kFoundNaN ? "NaN" : "Inf";
}

}  // namespace

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
    const Device& d = context->eigen_device<Device>();
    Tensor flags;
    OP_REQUIRES_OK(context,
                   context->allocate_temp(DT_INT32, TensorShape({n}), &flags));
    int* device_flags = flags.flat<int>().data();
    d.memset(device_flags, 0, n * sizeof(int));
    for (int i = 0; i < n; ++i) {
      const Tensor& x = context->input(i);
      if (x.NumElements() == 0) continue;
      switch (x.dtype()) {
#define CHECK_TYPE(T)                                                     \
  case DataTypeToEnum<T>::value:                                          \
    functor::NumericFlags<Device, T>()(d, x.flat<T>(), device_flags + i); \
    break;
        TF_CALL_half(CHECK_TYPE);
        TF_CALL_bfloat16(CHECK_TYPE);
        TF_CALL_float(CHECK_TYPE);
        TF_CALL_double(CHECK_TYPE);
#undef CHECK_TYPE
        default:
          context->CtxFailure(errors::InvalidArgument(
              "CheckNumericsN: tensors[", i, "] has unsupported dtype ",
              DataTypeString(x.dtype())));
          return;
      }
    }
    std::vector<int> host_flags(n);
    d.memcpyDeviceToHost(host_flags.data(), device_flags, n * sizeof(int));
    // The outputs are only valid once the check has finished.
    WaitFor(d);
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES(context, host_flags[i] == 0,
                  errors::InvalidArgument(message_, ": CheckNumericsN found ",
                                          Describe(host_flags[i]),
                                          " in tensors[", i, "] of ", n));
    }
    // Valid tensors pass through without a copy.
    for (int i = 0; i < n; ++i) context->set_output(i, context->input(i));
  }

 private:
  std::string message_;
};

REGISTER_KERNEL_BUILDER(Name("CustomOps>CheckNumericsN").Device(DEVICE_CPU),
                        CheckNumericsNOp<CPUDevice>);

#if GOOGLE_CUDA

namespace functor {
#define DECLARE_GPU_SPEC(T) extern template struct NumericFlags<GPUDevice, T>;
TF_CALL_half(DECLARE_GPU_SPEC);
TF_CALL_bfloat16(DECLARE_GPU_SPEC);
TF_CALL_float(DECLARE_GPU_SPEC);
TF_CALL_double(DECLARE_GPU_SPEC);
#undef DECLARE_GPU_SPEC
}  // namespace functor

REGISTER_KERNEL_BUILDER(Name("CustomOps>CheckNumericsN").Device(DEVICE_GPU),
                        CheckNumericsNOp<GPUDevice>);

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
