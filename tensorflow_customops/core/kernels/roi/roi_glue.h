// The OpKernels of the RoI ops (the glue; the kernels are the core's,
// roi_align_op.h and roi_pool_op.h): attribute parsing and input validation,
// shared by every RoI kernel. Every check runs before a kernel touches
// memory, and every failure is an InvalidArgument naming the argument.
//
// On the CPU the kernels are OpKernels that check the boxes' values on the
// host, then compute. On the GPU the boxes stay in device memory and the
// kernels are AsyncOpKernels that never wait for the GPU (docs/gpu.md,
// "Checks without waiting"): a device-side check hands the compute only
// boxes that pass it, and the boxes' copy in host memory is checked once the
// stream reaches the end of the op, with the CPU's messages.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GLUE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GLUE_H_

#include <cstdint>
#include <functional>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"
#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

namespace tensorflow {
namespace customops {
namespace roi {

// The attrs of a RoI kernel, read once when it is built.
struct RoiKernelAttrs {
  RoiAttrs attrs;
  TfcoDtype dtype;        // T, of the features and their gradients
  TfcoDtype boxes_dtype;  // Tboxes, of rois (and of a box gradient)
  bool on_gpu;            // the kernel's device: rois are in device memory
};

// A kernel's call once its inputs are validated (all but the values of
// rois) and its outputs allocated.
struct RoiCall {
  RoiArgs args;
  const Tensor* rois = nullptr;  // the input, [K, 5]
  bool empty = false;            // nothing to compute
  // Runs the kernel's portable entry point on `boxes`, rois or a copy of it.
  std::function<TfcoError(const TfcoDevice* device, const void* boxes)> launch;
};

// Prepares a forward kernel: features (input 0) and rois (input 1); every
// output with the pooled shape.
Status PrepareForward(OpKernelContext* context, const RoiKernelAttrs& k,
                      RoiCall* call);

// Prepares a gradient kernel: grads (input 0, with the pooled shape), rois
// (input 1), RoiPoolGrad's argmax (input 2; its values are checked on the
// CPU, and skipped where out of range by the GPU kernel) and features_shape
// (the last input, in host memory); the feature gradient (output 0).
Status PrepareBackward(OpKernelContext* context, const RoiKernelAttrs& k,
                       RoiCall* call);

// Prepares a box gradient kernel (RoiAlignGradBoxes, PsRoiAlignGradBoxes):
// grads (input 0, with the pooled shape), features (input 1) and rois
// (input 2); the box gradient (output 0, the shape of rois).
Status PrepareBoxGradient(OpKernelContext* context, const RoiKernelAttrs& k,
                          RoiCall* call);

using RoiPrepareFn = Status (*)(OpKernelContext*, const RoiKernelAttrs&,
                                RoiCall*);

// Reads `kind`'s attrs, T and Tboxes for a kernel on the GPU or the CPU.
Status ReadKernelAttrs(OpKernelConstruction* context, RoiKind kind, bool on_gpu,
                       RoiKernelAttrs* k);

// Checks the values of a prepared call's rois (host memory), then runs it.
Status RunOnCpu(OpKernelContext* context, const RoiCall& call);

// Runs a prepared call on the GPU without waiting for it, and calls `done`
// when the stream has finished it and its boxes are checked.
void RunOnGpu(OpKernelContext* context, const RoiCall& call,
              AsyncOpKernel::DoneCallback done);

// The kernels of a RoI op, its gradient or its box gradient (kPrepare).
template <bool kOnGpu, RoiKind kKind, RoiPrepareFn kPrepare>
class RoiOp : public OpKernel {
 public:
  explicit RoiOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, ReadKernelAttrs(context, kKind, false, &attrs_));
  }

  void Compute(OpKernelContext* context) override {
    RoiCall call;
    OP_REQUIRES_OK(context, kPrepare(context, attrs_, &call));
    OP_REQUIRES_OK(context, RunOnCpu(context, call));
  }

 private:
  RoiKernelAttrs attrs_;
};

template <RoiKind kKind, RoiPrepareFn kPrepare>
class RoiOp<true, kKind, kPrepare> : public AsyncOpKernel {
 public:
  explicit RoiOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, ReadKernelAttrs(context, kKind, true, &attrs_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    RoiCall call;
    OP_REQUIRES_OK_ASYNC(context, kPrepare(context, attrs_, &call), done);
    RunOnGpu(context, call, std::move(done));
  }

 private:
  RoiKernelAttrs attrs_;
};

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

// Registers the kernels of CustomOps>`op` and its gradient for type T on
// `device` (DEVICE_CPU, or DEVICE_GPU with on_gpu true) for every boxes'
// type Tboxes (the kernels refuse the pairs BoxTypesOk does not accept when
// they are built). rois stay where TensorFlow puts them (device memory on
// the GPU); features_shape, read to allocate, lives in host memory.
#define TFCO_REGISTER_ROI_KERNELS(device, on_gpu, op, kind, T)     \
  TFCO_REGISTER_KERNEL_BUILDER(                                    \
      Name("CustomOps>" op).Device(device).TypeConstraint<T>("T"), \
      ::tensorflow::customops::roi::RoiOp<                         \
          on_gpu, ::tensorflow::customops::roi::kind,              \
          ::tensorflow::customops::roi::PrepareForward>);          \
  TFCO_REGISTER_KERNEL_BUILDER(                                    \
      Name("CustomOps>" op "Grad")                                 \
          .Device(device)                                          \
          .TypeConstraint<T>("T")                                  \
          .HostMemory("features_shape"),                           \
      ::tensorflow::customops::roi::RoiOp<                         \
          on_gpu, ::tensorflow::customops::roi::kind,              \
          ::tensorflow::customops::roi::PrepareBackward>)

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GLUE_H_
