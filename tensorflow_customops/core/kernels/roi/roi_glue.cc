#include "tensorflow_customops/core/kernels/roi/roi_glue.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "tensorflow/core/framework/allocator.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

namespace tensorflow {
namespace customops {
namespace roi {

namespace {

// Checks the values of rois (CheckRoiValues), in host memory, against the
// call's batch and scale.
Status CheckRoiTensor(const Tensor& rois, const RoiArgs& args) {
  const int64_t k = rois.dim_size(0);
  if (rois.dtype() == DT_DOUBLE) {
    return CheckRoiValues(rois.flat<double>().data(), k, args.shape.batch,
                          args.attrs.spatial_scale);
  }
  return CheckRoiValues(rois.flat<float>().data(), k, args.shape.batch,
                        args.attrs.spatial_scale);
}

// Reads a gradient op's features_shape input (int32 [4], host memory).
Status FeaturesShapeFromTensor(const Tensor& features_shape, TensorShape* out) {
  std::vector<int64_t> values;
  if (features_shape.NumElements() == 4 && features_shape.dims() == 1) {
    const auto v = features_shape.vec<int32_t>();
    values.assign(v.data(), v.data() + 4);
  }
  return FeaturesShapeFromValues(features_shape.shape(), values, out);
}

// argmax must have the pooled shape, and on the CPU every entry must be -1 or
// a pixel of the map: the gradient op writes where it points. On GPU the
// values live in device memory and the kernel skips out-of-range entries
// instead.
Status ValidateArgmax(OpKernelContext* context, const Tensor& argmax,
                      const TensorShape& expected, int64_t area,
                      bool check_values) {
  if (argmax.shape() != expected) {
    return errors::InvalidArgument("argmax must have shape ",
                                   expected.DebugString(), ", got ",
                                   argmax.shape().DebugString());
  }
  if (!check_values) return OkStatus();
  const int32_t* values = argmax.flat<int32_t>().data();
  const int64_t size = argmax.NumElements();
  // Shards without an early exit vectorise, and split the memory traffic of
  // an input as large as the pooled tensor over the threads; only a failure
  // looks for the first bad value.
  std::atomic<bool> bad(false);
  context->eigen_cpu_device().parallelFor(
      size, Eigen::TensorOpCost(sizeof(int32_t), 0, 2),
      [&](int64_t begin, int64_t end) {
        if (!ArgmaxInRange(values, begin, end, area)) bad = true;
      });
  if (!bad) return OkStatus();
  return ArgmaxError(values, size, area);
}

const int32_t* Int32Data(const Tensor* t) {
  return t == nullptr ? nullptr : t->flat<int32_t>().data();
}

}  // namespace

Status ReadKernelAttrs(OpKernelConstruction* context, RoiKind kind, bool on_gpu,
                       RoiKernelAttrs* k) {
  k->on_gpu = on_gpu;
  TF_RETURN_IF_ERROR(ReadRoiAttrs(context, kind, &k->attrs));
  DataType dtype, boxes;
  TF_RETURN_IF_ERROR(context->GetAttr("T", &dtype));
  TF_RETURN_IF_ERROR(ReadBoxesDtype(context, &boxes));
  k->dtype = CoreDtype(dtype);
  k->boxes_dtype = boxes == DT_DOUBLE ? TFCO_DOUBLE : TFCO_FLOAT;
  return OkStatus();
}

Status PrepareForward(OpKernelContext* context, const RoiKernelAttrs& k,
                      RoiCall* call) {
  const Tensor& features = context->input(0);
  call->rois = &context->input(1);
  RoiShape shape;
  TF_RETURN_IF_ERROR(
      GetFeatureSizes(features.shape(), k.attrs, "features", &shape));
  TF_RETURN_IF_ERROR(CheckRoisShape(call->rois->shape(), &shape));
  TensorShape pooled_shape;
  TF_RETURN_IF_ERROR(PooledShape(shape, k.attrs, &pooled_shape));
  Tensor* outputs[2] = {};
  for (int i = 0; i < context->num_outputs(); ++i) {
    TF_RETURN_IF_ERROR(context->allocate_output(i, pooled_shape, &outputs[i]));
  }
  call->args = RoiArgs::Make(shape, k.attrs);
  call->empty = pooled_shape.num_elements() == 0;
  // One signature serves every kind: RoiPool's argmax, null for the others.
  const auto entry = k.attrs.bilinear() ? TfcoRoiAlign : TfcoRoiPool;
  int32_t* argmax =
      outputs[1] == nullptr ? nullptr : outputs[1]->flat<int32_t>().data();
  call->launch = [entry, k, args = call->args, features = features.data(),
                  pooled = outputs[0]->data(),
                  argmax](const TfcoDevice* device, const void* boxes) {
    return entry(device, k.dtype, k.boxes_dtype, &args, features, boxes, pooled,
                 argmax);
  };
  return OkStatus();
}

Status PrepareBackward(OpKernelContext* context, const RoiKernelAttrs& k,
                       RoiCall* call) {
  const Tensor& grads = context->input(0);
  call->rois = &context->input(1);
  TensorShape features_shape;
  TF_RETURN_IF_ERROR(FeaturesShapeFromTensor(
      context->input(context->num_inputs() - 1), &features_shape));
  RoiShape shape;
  TF_RETURN_IF_ERROR(
      GetFeatureSizes(features_shape, k.attrs, "features_shape", &shape));
  TF_RETURN_IF_ERROR(CheckRoisShape(call->rois->shape(), &shape));
  TF_RETURN_IF_ERROR(
      CheckPooledGradShape(grads.shape(), shape, k.attrs, "grads"));
  const Tensor* argmax = nullptr;
  if (k.attrs.kind == RoiKind::kPool) {
    argmax = &context->input(2);
    TF_RETURN_IF_ERROR(ValidateArgmax(context, *argmax, grads.shape(),
                                      shape.height * shape.width, !k.on_gpu));
  }
  Tensor* grad_features = nullptr;
  TF_RETURN_IF_ERROR(
      context->allocate_output(0, features_shape, &grad_features));
  call->args = RoiArgs::Make(shape, k.attrs);
  call->empty = features_shape.num_elements() == 0;
  const auto entry = k.attrs.bilinear() ? TfcoRoiAlignGrad : TfcoRoiPoolGrad;
  call->launch = [entry, k, args = call->args, grads = grads.data(),
                  argmax = Int32Data(argmax), out = grad_features->data()](
                     const TfcoDevice* device, const void* boxes) {
    return entry(device, k.dtype, k.boxes_dtype, &args, grads, boxes, argmax,
                 out);
  };
  return OkStatus();
}

Status PrepareBoxGradient(OpKernelContext* context, const RoiKernelAttrs& k,
                          RoiCall* call) {
  const Tensor& grads = context->input(0);
  const Tensor& features = context->input(1);
  call->rois = &context->input(2);
  RoiShape shape;
  TF_RETURN_IF_ERROR(
      GetFeatureSizes(features.shape(), k.attrs, "features", &shape));
  TF_RETURN_IF_ERROR(CheckRoisShape(call->rois->shape(), &shape));
  TF_RETURN_IF_ERROR(
      CheckPooledGradShape(grads.shape(), shape, k.attrs, "grads"));
  Tensor* grad_rois = nullptr;
  TF_RETURN_IF_ERROR(
      context->allocate_output(0, call->rois->shape(), &grad_rois));
  call->args = RoiArgs::Make(shape, k.attrs);
  call->empty = shape.num_rois == 0;
  call->launch = [k, args = call->args, grads = grads.data(),
                  features = features.data(), out = grad_rois->data()](
                     const TfcoDevice* device, const void* boxes) {
    return TfcoRoiAlignGradBoxes(device, k.dtype, k.boxes_dtype, &args, grads,
                                 features, boxes, out);
  };
  return OkStatus();
}

Status RunOnCpu(OpKernelContext* context, const RoiCall& call) {
  TF_RETURN_IF_ERROR(CheckRoiTensor(*call.rois, call.args));
  if (call.empty) return OkStatus();
  const CoreDevice device(context, /*on_gpu=*/false);
  return CoreStatus(call.launch(device.get(), call.rois->data()));
}

void RunOnGpu(OpKernelContext* context, const RoiCall& call,
              AsyncOpKernel::DoneCallback done) {
  const Tensor& rois = *call.rois;
  const int64_t num_rois = call.args.shape.num_rois;
  const CoreDevice device(context, /*on_gpu=*/true);
  if (num_rois == 0) {  // no value to check
    if (!call.empty) {
      OP_REQUIRES_OK_ASYNC(
          context, CoreStatus(call.launch(device.get(), rois.data())), done);
    }
    done();
    return;
  }
  // The boxes' copy in page-locked host memory, and, for the compute, the
  // boxes with each that fails the checks replaced by the null box
  // (TfcoRoiCheckBoxes, as under XLA), so that no kernel reads out of bounds
  // before the host has seen them.
  AllocatorAttributes pinned;
  pinned.set_on_host(true);
  pinned.set_gpu_compatible(true);
  Tensor host_rois, checked;
  OP_REQUIRES_OK_ASYNC(
      context,
      context->allocate_temp(rois.dtype(), rois.shape(), &host_rois, pinned),
      done);
  if (!call.empty) {
    OP_REQUIRES_OK_ASYNC(
        context, context->allocate_temp(rois.dtype(), rois.shape(), &checked),
        done);
  }
  const TfcoDtype boxes_dtype =
      rois.dtype() == DT_DOUBLE ? TFCO_DOUBLE : TFCO_FLOAT;
  Status copied = CoreStatus(TfcoCopyToHost(
      device.get(), rois.data(), host_rois.data(), rois.TotalBytes()));
  Status launched;
  if (copied.ok() && !call.empty) {
    launched = CoreStatus(TfcoRoiCheckBoxes(
        device.get(), boxes_dtype, num_rois, call.args.shape.batch,
        call.args.attrs.spatial_scale, rois.data(), checked.data()));
    if (launched.ok()) {
      launched = CoreStatus(call.launch(device.get(), checked.data()));
    }
  }
  // A failure above stops what follows it, but whatever was enqueued may
  // still use the buffers, so they are released only after the stream.
  WhenGpuDone(context, [context, done = std::move(done), args = call.args,
                        host_rois, checked, copied, launched](Status stream) {
    OP_REQUIRES_OK_ASYNC(context, stream, done);
    OP_REQUIRES_OK_ASYNC(context, copied, done);
    OP_REQUIRES_OK_ASYNC(context, CheckRoiTensor(host_rois, args), done);
    OP_REQUIRES_OK_ASYNC(context, launched, done);
    done();
  });
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
