// The OpKernels of CustomOps>ClipByGlobalNorm and
// CustomOps>ClipByGlobalNormGrad, which run the portable kernels'
// TfcoClipByGlobalNorm and TfcoClipByGlobalNormGrad
// (clip_by_global_norm_op_entry.cc).

#include "tensorflow_customops/core/kernels/clip_by_global_norm/clip_by_global_norm_op.h"

#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace {

Status CheckScalar(const Tensor& tensor, const char* op, const char* name) {
  if (TensorShapeUtils::IsScalar(tensor.shape())) return OkStatus();
  return errors::InvalidArgument(op, ": ", name,
                                 " must be a scalar, got shape ",
                                 tensor.shape().DebugString());
}

// The core's device scratch memory (null when it needs none), held by
// `storage` for the duration of the kernel.
Status AllocateScratch(OpKernelContext* context, int64_t bytes, Tensor* storage,
                       void** scratch) {
  *scratch = nullptr;
  if (bytes == 0) return OkStatus();
  TF_RETURN_IF_ERROR(
      context->allocate_temp(DT_INT8, TensorShape({bytes}), storage));
  *scratch = storage->flat<int8>().data();
  return OkStatus();
}

}  // namespace

template <typename Device, typename T>
class ClipByGlobalNormOp : public OpKernel {
 public:
  explicit ClipByGlobalNormOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    OpInputList t;
    OP_REQUIRES_OK(context, context->input_list("t", &t));
    const int n = t.size();
    OP_REQUIRES(context, n >= 1,
                errors::InvalidArgument("ClipByGlobalNorm: t must hold at "
                                        "least one tensor"));
    const Tensor& clip_norm = context->input(n);
    OP_REQUIRES_OK(context,
                   CheckScalar(clip_norm, "ClipByGlobalNorm", "clip_norm"));

    std::vector<const void*> inputs(n);
    std::vector<int64_t> sizes(n);
    std::vector<void*> outputs(n);
    for (int i = 0; i < n; ++i) {
      Tensor* out = nullptr;
      // Scaling in place is safe: each element is read before it is written.
      OP_REQUIRES_OK(context, context->forward_input_or_allocate_output(
                                  {i}, i, t[i].shape(), &out));
      inputs[i] = t[i].data();
      sizes[i] = t[i].NumElements();
      outputs[i] = out->data();
    }
    Tensor* global_norm = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(n, TensorShape({}), &global_norm));
    Tensor storage;
    void* scratch;
    OP_REQUIRES_OK(context,
                   AllocateScratch(context,
                                   TfcoClipByGlobalNormScratchBytes(
                                       OnGpu<Device>(), 0, CoreDtype<T>(), n),
                                   &storage, &scratch));
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(context, CoreStatus(TfcoClipByGlobalNorm(
                                device.get(), CoreDtype<T>(), n, inputs.data(),
                                sizes.data(), clip_norm.data(), outputs.data(),
                                global_norm->data(), scratch)));
  }
};

template <typename Device, typename T>
class ClipByGlobalNormGradOp : public OpKernel {
 public:
  explicit ClipByGlobalNormGradOp(OpKernelConstruction* context)
      : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    OpInputList t;
    OpInputList dclipped;
    OP_REQUIRES_OK(context, context->input_list("t", &t));
    OP_REQUIRES_OK(context, context->input_list("dclipped", &dclipped));
    const int n = t.size();
    OP_REQUIRES(context, n >= 1,
                errors::InvalidArgument("ClipByGlobalNormGrad: t must hold at "
                                        "least one tensor"));
    const Tensor& clip_norm = context->input(n);
    const Tensor& dglobal_norm = context->input(2 * n + 1);
    OP_REQUIRES_OK(context,
                   CheckScalar(clip_norm, "ClipByGlobalNormGrad", "clip_norm"));
    OP_REQUIRES_OK(context, CheckScalar(dglobal_norm, "ClipByGlobalNormGrad",
                                        "dglobal_norm"));

    std::vector<const void*> inputs(n);
    std::vector<int64_t> sizes(n);
    std::vector<const void*> grads(n);
    std::vector<void*> outputs(n);
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES(context, dclipped[i].shape() == t[i].shape(),
                  errors::InvalidArgument(
                      "ClipByGlobalNormGrad: dclipped[", i, "] has shape ",
                      dclipped[i].shape().DebugString(), " but t[", i,
                      "] has shape ", t[i].shape().DebugString()));
    }
    for (int i = 0; i < n; ++i) {
      Tensor* out = nullptr;
      // dt[i] may reuse dclipped[i]: each element is read before it is
      // written.
      OP_REQUIRES_OK(context, context->forward_input_or_allocate_output(
                                  {n + 1 + i}, i, t[i].shape(), &out));
      inputs[i] = t[i].data();
      sizes[i] = t[i].NumElements();
      grads[i] = dclipped[i].data();
      outputs[i] = out->data();
    }
    Tensor* dclip_norm = nullptr;
    OP_REQUIRES_OK(context,
                   context->allocate_output(n, TensorShape({}), &dclip_norm));
    Tensor storage;
    void* scratch;
    OP_REQUIRES_OK(context,
                   AllocateScratch(context,
                                   TfcoClipByGlobalNormScratchBytes(
                                       OnGpu<Device>(), 1, CoreDtype<T>(), n),
                                   &storage, &scratch));
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(context, CoreStatus(TfcoClipByGlobalNormGrad(
                                device.get(), CoreDtype<T>(), n, inputs.data(),
                                sizes.data(), clip_norm.data(), grads.data(),
                                dglobal_norm.data(), outputs.data(),
                                dclip_norm->data(), scratch)));
  }
};

#define REGISTER_CPU(T)                                               \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>ClipByGlobalNorm")     \
                                   .Device(DEVICE_CPU)                \
                                   .TypeConstraint<T>("T"),           \
                               ClipByGlobalNormOp<CPUDevice, T>);     \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>ClipByGlobalNormGrad") \
                                   .Device(DEVICE_CPU)                \
                                   .TypeConstraint<T>("T"),           \
                               ClipByGlobalNormGradOp<CPUDevice, T>);
TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

// clip_norm stays in host memory: the kernels need its value on the host to
// pass it to the GPU kernels as an argument, without a device-to-host copy.
#define REGISTER_GPU(T)                                               \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>ClipByGlobalNorm")     \
                                   .Device(DEVICE_GPU)                \
                                   .HostMemory("clip_norm")           \
                                   .TypeConstraint<T>("T"),           \
                               ClipByGlobalNormOp<GPUDevice, T>);     \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>ClipByGlobalNormGrad") \
                                   .Device(DEVICE_GPU)                \
                                   .HostMemory("clip_norm")           \
                                   .TypeConstraint<T>("T"),           \
                               ClipByGlobalNormGradOp<GPUDevice, T>);
TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
