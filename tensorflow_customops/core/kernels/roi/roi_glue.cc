#include "tensorflow_customops/core/kernels/roi/roi_glue.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace customops {
namespace roi {

namespace {

// Checks rois: [K, 5] (CheckRoisShape), float or double, with valid values
// (CheckRoiValues). Fills shape->num_rois.
Status ValidateRois(const Tensor& rois, float spatial_scale, RoiShape* shape) {
  TF_RETURN_IF_ERROR(CheckRoisShape(rois.shape(), shape));
  if (rois.dtype() == DT_DOUBLE) {
    return CheckRoiValues(rois.flat<double>().data(), shape->num_rois,
                          shape->batch, spatial_scale);
  }
  return CheckRoiValues(rois.flat<float>().data(), shape->num_rois,
                        shape->batch, spatial_scale);
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

// argmax must have the pooled shape, and every entry must be -1 or a pixel of
// the map: the gradient op writes where it points. On GPU the values live in
// device memory and the kernel skips out-of-range entries instead.
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

// Points call->rois at the validated rois where the kernel runs: on GPU a
// device copy, made once per call.
Status PlaceRois(OpKernelContext* context, const Tensor& rois,
                 const RoiKernelOptions& options, RoiCall* call) {
  call->rois = rois.data();
  if (!options.on_gpu || call->empty) return OkStatus();
  TF_RETURN_IF_ERROR(
      context->allocate_temp(rois.dtype(), rois.shape(), &call->device_rois));
  void* device = call->device_rois.data();
  const CoreDevice core_device(context, /*on_gpu=*/true);
  TF_RETURN_IF_ERROR(CoreStatus(
      TfcoCopyToGpu(core_device.get(), call->rois, device, rois.TotalBytes())));
  call->rois = device;
  return OkStatus();
}

}  // namespace

Status PrepareForward(OpKernelContext* context, const RoiAttrs& attrs,
                      const RoiKernelOptions& options, RoiCall* call) {
  const Tensor& rois = context->input(1);
  RoiShape shape;
  TF_RETURN_IF_ERROR(
      GetFeatureSizes(context->input(0).shape(), attrs, "features", &shape));
  TF_RETURN_IF_ERROR(ValidateRois(rois, attrs.spatial_scale, &shape));
  TensorShape pooled_shape;
  TF_RETURN_IF_ERROR(PooledShape(shape, attrs, &pooled_shape));
  for (int i = 0; i < context->num_outputs(); ++i) {
    TF_RETURN_IF_ERROR(
        context->allocate_output(i, pooled_shape, &call->outputs[i]));
  }
  call->args = RoiArgs::Make(shape, attrs);
  call->empty = pooled_shape.num_elements() == 0;
  return PlaceRois(context, rois, options, call);
}

Status PrepareBackward(OpKernelContext* context, const RoiAttrs& attrs,
                       const RoiKernelOptions& options, RoiCall* call) {
  const Tensor& grads = context->input(0);
  const Tensor& rois = context->input(1);
  TensorShape features_shape;
  TF_RETURN_IF_ERROR(FeaturesShapeFromTensor(
      context->input(context->num_inputs() - 1), &features_shape));
  RoiShape shape;
  TF_RETURN_IF_ERROR(
      GetFeatureSizes(features_shape, attrs, "features_shape", &shape));
  TF_RETURN_IF_ERROR(ValidateRois(rois, attrs.spatial_scale, &shape));
  TF_RETURN_IF_ERROR(
      CheckPooledGradShape(grads.shape(), shape, attrs, "grads"));
  if (attrs.kind == RoiKind::kPool) {
    const Tensor& argmax = context->input(2);
    TF_RETURN_IF_ERROR(ValidateArgmax(context, argmax, grads.shape(),
                                      shape.height * shape.width,
                                      !options.on_gpu));
    call->argmax = argmax.flat<int32_t>().data();
  }
  TF_RETURN_IF_ERROR(
      context->allocate_output(0, features_shape, &call->grad_features));
  call->args = RoiArgs::Make(shape, attrs);
  call->empty = features_shape.num_elements() == 0;
  return PlaceRois(context, rois, options, call);
}

Status PrepareBoxGradient(OpKernelContext* context, const RoiAttrs& attrs,
                          const RoiKernelOptions& options, RoiCall* call) {
  const Tensor& grads = context->input(0);
  const Tensor& features = context->input(1);
  const Tensor& rois = context->input(2);
  RoiShape shape;
  TF_RETURN_IF_ERROR(
      GetFeatureSizes(features.shape(), attrs, "features", &shape));
  TF_RETURN_IF_ERROR(ValidateRois(rois, attrs.spatial_scale, &shape));
  TF_RETURN_IF_ERROR(
      CheckPooledGradShape(grads.shape(), shape, attrs, "grads"));
  TF_RETURN_IF_ERROR(
      context->allocate_output(0, rois.shape(), &call->outputs[0]));
  call->args = RoiArgs::Make(shape, attrs);
  call->empty = shape.num_rois == 0;
  return PlaceRois(context, rois, options, call);
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
