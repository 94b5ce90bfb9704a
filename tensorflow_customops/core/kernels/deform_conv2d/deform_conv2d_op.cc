// The OpKernels of CustomOps>DeformableConv2d and its gradient op, which
// validate every input and run the portable kernels' TfcoDeformableConv2d and
// TfcoDeformableConv2dGrad (deform_conv2d_op_entry.cc).

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"

#include <array>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/util/determinism.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_shape.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace {

namespace dc = deform_conv2d;

Status Dims4(const Tensor& t, const char* name, std::array<int64_t, 4>* dims) {
  if (t.dims() != 4) {
    return errors::InvalidArgument("DeformableConv2d: ", name,
                                   " must have rank 4, got shape ",
                                   t.shape().DebugString());
  }
  for (int d = 0; d < 4; ++d) (*dims)[d] = t.dim_size(d);
  return OkStatus();
}

// Checks inputs 0 to 3 (input, filter, offset, mask) and fills the core's
// arguments.
Status CheckInputs(OpKernelContext* context, const dc::Attrs& attrs,
                   dc::Geometry* g, TfcoDeformConv2dArgs* args) {
  std::array<int64_t, 4> input, filter, offset, mask{-1, -1, -1, -1};
  TF_RETURN_IF_ERROR(Dims4(context->input(0), "input", &input));
  TF_RETURN_IF_ERROR(Dims4(context->input(1), "filter", &filter));
  TF_RETURN_IF_ERROR(Dims4(context->input(2), "offset", &offset));
  const Tensor& mask_tensor = context->input(3);
  if (attrs.use_mask) {
    TF_RETURN_IF_ERROR(Dims4(mask_tensor, "mask", &mask));
  } else if (mask_tensor.NumElements() != 0) {
    return errors::InvalidArgument(
        "DeformableConv2d: mask must be empty when use_mask is false, got ",
        mask_tensor.shape().DebugString());
  }
  TF_RETURN_IF_ERROR(dc::GetGeometry(attrs, input, filter, offset, mask, g));
  return dc::CoreArgs(attrs, *g, args);
}

Status OutputShape(const dc::Attrs& attrs, const dc::Geometry& g,
                   TensorShape* shape) {
  const auto dims = dc::OutputDims(attrs, g);
  Status status = TensorShape::BuildTensorShape(
      {dims[0], dims[1], dims[2], dims[3]}, shape);
  if (!status.ok()) {
    return errors::InvalidArgument("DeformableConv2d: the output ",
                                   dc::Dims(dims),
                                   ": its number of elements overflows int64");
  }
  return OkStatus();
}

// What both kernels check first: the inputs, with the core's arguments and
// the output's shape.
Status Validate(OpKernelContext* context, const dc::Attrs& attrs,
                TfcoDeformConv2dArgs* args, TensorShape* output_shape) {
  dc::Geometry g;
  TF_RETURN_IF_ERROR(CheckInputs(context, attrs, &g, args));
  return OutputShape(attrs, g, output_shape);
}

}  // namespace

template <typename Device, typename T>
class DeformableConv2dOp : public OpKernel {
 public:
  explicit DeformableConv2dOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, dc::GetAttrs(context, &attrs_));
  }

  void Compute(OpKernelContext* context) override {
    TfcoDeformConv2dArgs args;
    TensorShape shape;
    OP_REQUIRES_OK(context, Validate(context, attrs_, &args, &shape));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, shape, &output));
    if (output->NumElements() == 0) return;
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(
        context,
        CoreStatus(TfcoDeformableConv2d(
            device.get(), CoreDtype<T>(), &args, context->input(0).data(),
            context->input(1).data(), context->input(2).data(),
            context->input(3).data(), output->data())));
  }

 private:
  dc::Attrs attrs_;
};

template <typename Device, typename T>
class DeformableConv2dGradOp : public OpKernel {
 public:
  explicit DeformableConv2dGradOp(OpKernelConstruction* context)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, dc::GetAttrs(context, &attrs_));
  }

  void Compute(OpKernelContext* context) override {
    TfcoDeformConv2dArgs args;
    TensorShape shape;
    OP_REQUIRES_OK(context, Validate(context, attrs_, &args, &shape));
    const Tensor& grad_output = context->input(4);
    OP_REQUIRES(context, grad_output.shape() == shape,
                errors::InvalidArgument("DeformableConv2d: grad_output ",
                                        grad_output.shape().DebugString(),
                                        " must have the shape of the output, ",
                                        shape.DebugString()));
    Tensor* grads[4];
    for (int i = 0; i < 4; ++i) {
      OP_REQUIRES_OK(context, context->allocate_output(
                                  i, context->input(i).shape(), &grads[i]));
    }
    // Every gradient is empty, or zero when nothing flows back; the core
    // writes the zeros.
    if (grads[0]->NumElements() + grads[1]->NumElements() +
            grads[2]->NumElements() + grads[3]->NumElements() ==
        0) {
      return;
    }
    // The GPU input gradient adds with atomics, in a varying order.
    OP_REQUIRES(context, !OnGpu<Device>() || !OpDeterminismRequired(),
                errors::Unimplemented(
                    "DeformableConv2dGrad has no deterministic GPU kernel (its "
                    "input gradient adds with atomics), and op determinism is "
                    "enabled: run the gradient on the CPU"));
    const CoreDevice device(context, OnGpu<Device>());
    OP_REQUIRES_OK(
        context,
        CoreStatus(TfcoDeformableConv2dGrad(
            device.get(), CoreDtype<T>(), &args, context->input(0).data(),
            context->input(1).data(), context->input(2).data(),
            context->input(3).data(), grad_output.data(), grads[0]->data(),
            grads[1]->data(), grads[2]->data(), grads[3]->data())));
  }

 private:
  dc::Attrs attrs_;
};

#define REGISTER(DEVICE, D, T)                                        \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>DeformableConv2d")     \
                                   .Device(DEVICE)                    \
                                   .TypeConstraint<T>("T"),           \
                               DeformableConv2dOp<D, T>);             \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>DeformableConv2dGrad") \
                                   .Device(DEVICE)                    \
                                   .TypeConstraint<T>("T"),           \
                               DeformableConv2dGradOp<D, T>);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, CPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA
#define REGISTER_GPU(T) REGISTER(DEVICE_GPU, GPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_GPU);
#undef REGISTER_GPU
#endif  // GOOGLE_CUDA
#undef REGISTER

}  // namespace customops
}  // namespace tensorflow
