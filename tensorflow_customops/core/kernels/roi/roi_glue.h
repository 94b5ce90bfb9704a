// The OpKernels of the RoI ops (the glue; the kernels are the core's,
// roi_align_op.h and roi_pool_op.h): attribute parsing and input validation,
// shared by every RoI kernel. Every check runs before a kernel touches
// memory, and every failure is an InvalidArgument naming the argument.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GLUE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GLUE_H_

#include <cstdint>
#include <type_traits>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"
#include "tensorflow_customops/core/kernels/roi/roi_args.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Where a kernel runs, fixed by its device.
struct RoiKernelOptions {
  bool on_gpu;
};
template <typename Device, typename T>
constexpr RoiKernelOptions OptionsFor() {
  return RoiKernelOptions{
      !std::is_same<Device, Eigen::ThreadPoolDevice>::value};
}

// What a kernel knows once its inputs are validated and outputs allocated.
struct RoiCall {
  RoiArgs args;                     // layouts as the tensors are
  const void* rois = nullptr;       // the validated rois where the kernel runs
  const int32_t* argmax = nullptr;  // RoiPoolGrad's argmax input
  Tensor* outputs[2] = {};          // forward outputs (pooled, argmax)
  Tensor* grad_features = nullptr;  // gradient output
  Tensor device_rois;               // on GPU, the copy `rois` points to
  bool empty = false;               // the outputs have no elements
};

// Validates a forward kernel's features (input 0) and rois (input 1);
// allocates every output with the pooled shape and, on GPU, copies the rois
// to the device.
Status PrepareForward(OpKernelContext* context, const RoiAttrs& attrs,
                      const RoiKernelOptions& options, RoiCall* call);

// The same for a gradient kernel: grads (input 0, with the pooled shape),
// rois (input 1), RoiPoolGrad's argmax (input 2) and features_shape (the last
// input); allocates the feature gradient (output 0).
Status PrepareBackward(OpKernelContext* context, const RoiAttrs& attrs,
                       const RoiKernelOptions& options, RoiCall* call);

// The same for a box gradient kernel (RoiAlignGradBoxes, PsRoiAlignGradBoxes):
// grads (input 0, with the pooled shape), features (input 1) and rois
// (input 2); allocates the box gradient (output 0, the shape of rois) as
// call->outputs[0]. call->empty means there are no boxes.
Status PrepareBoxGradient(OpKernelContext* context, const RoiAttrs& attrs,
                          const RoiKernelOptions& options, RoiCall* call);

// The op kernels of every RoI op and gradient: `kind`'s attrs, validation,
// then a family's launcher, Launch, which calls the core's entry points:
//   static TfcoError Forward(const TfcoDevice*, TfcoDtype dtype,
//                            TfcoDtype boxes_dtype, const RoiArgs*,
//                            const void* features, const void* rois,
//                            void* pooled, int32_t* argmax);
//   static TfcoError Backward(const TfcoDevice*, TfcoDtype dtype,
//                             TfcoDtype boxes_dtype, const RoiArgs*,
//                             const void* grads, const void* rois,
//                             const int32_t* argmax, void* grad_features);
// (argmax is RoiPool's second output and RoiPoolGrad's input, null for the
// other kinds).
template <RoiKind kKind>
class RoiOpKernel : public OpKernel {
 public:
  explicit RoiOpKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, ReadRoiAttrs(context, kKind, &attrs_));
    DataType boxes;
    OP_REQUIRES_OK(context, ReadBoxesDtype(context, &boxes));
    boxes_dtype_ = boxes == DT_DOUBLE ? TFCO_DOUBLE : TFCO_FLOAT;
  }

 protected:
  RoiAttrs attrs_;
  TfcoDtype boxes_dtype_;  // of rois (and of a box gradient)
};

template <typename Device, typename T, RoiKind kKind, typename Launch>
class RoiForwardOp : public RoiOpKernel<kKind> {
 public:
  using RoiOpKernel<kKind>::RoiOpKernel;

  void Compute(OpKernelContext* context) override {
    constexpr RoiKernelOptions options = OptionsFor<Device, T>();
    RoiCall call;
    OP_REQUIRES_OK(context,
                   PrepareForward(context, this->attrs_, options, &call));
    if (call.empty) return;
    const CoreDevice device(context, options.on_gpu);
    int32_t* argmax = call.outputs[1] != nullptr
                          ? call.outputs[1]->flat<int32_t>().data()
                          : nullptr;
    OP_REQUIRES_OK(
        context, CoreStatus(Launch::Forward(device.get(), CoreDtype<T>(),
                                            this->boxes_dtype_, &call.args,
                                            context->input(0).data(), call.rois,
                                            call.outputs[0]->data(), argmax)));
  }
};

template <typename Device, typename T, RoiKind kKind, typename Launch>
class RoiBackwardOp : public RoiOpKernel<kKind> {
 public:
  using RoiOpKernel<kKind>::RoiOpKernel;

  void Compute(OpKernelContext* context) override {
    constexpr RoiKernelOptions options = OptionsFor<Device, T>();
    RoiCall call;
    OP_REQUIRES_OK(context,
                   PrepareBackward(context, this->attrs_, options, &call));
    if (call.empty) return;
    const CoreDevice device(context, options.on_gpu);
    OP_REQUIRES_OK(context,
                   CoreStatus(Launch::Backward(
                       device.get(), CoreDtype<T>(), this->boxes_dtype_,
                       &call.args, context->input(0).data(), call.rois,
                       call.argmax, call.grad_features->data())));
  }
};

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

// Registers the kernels of CustomOps>`op` and its gradient for type T on
// `device` (DEVICE_CPU or DEVICE_GPU; DeviceType is the Eigen device), built
// from RoiForwardOp and RoiBackwardOp with `Launch`, for every boxes' type
// Tboxes (the kernels refuse the pairs BoxTypesOk does not accept when they
// are built). rois and features_shape live in host memory: every box (its
// batch index above all) is validated on the host before anything is
// launched.
#define TFCO_REGISTER_ROI_KERNELS(device, DeviceType, op, kind, Launch, T) \
  TFCO_REGISTER_KERNEL_BUILDER(                                            \
      Name("CustomOps>" op)                                                \
          .Device(device)                                                  \
          .TypeConstraint<T>("T")                                          \
          .HostMemory("rois"),                                             \
      ::tensorflow::customops::roi::RoiForwardOp<                          \
          DeviceType, T, ::tensorflow::customops::roi::kind, Launch>);     \
  TFCO_REGISTER_KERNEL_BUILDER(                                            \
      Name("CustomOps>" op "Grad")                                         \
          .Device(device)                                                  \
          .TypeConstraint<T>("T")                                          \
          .HostMemory("rois")                                              \
          .HostMemory("features_shape"),                                   \
      ::tensorflow::customops::roi::RoiBackwardOp<                         \
          DeviceType, T, ::tensorflow::customops::roi::kind, Launch>)

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GLUE_H_
