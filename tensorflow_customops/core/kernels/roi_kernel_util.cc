#include "tensorflow_customops/core/kernels/roi_kernel_util.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace customops {
namespace roi {

namespace {

// Checks rois: float [K, 5], every coordinate finite and, once scaled by
// spatial_scale, within kMaxScaledCoordinate; every batch index an integer in
// [0, batch). Fills shape->num_rois.
Status ValidateRois(const Tensor& rois, float spatial_scale, RoiShape* shape) {
  TF_RETURN_IF_ERROR(CheckRoisShape(rois.shape(), shape));
  const float* data = rois.flat<float>().data();
  for (int64_t k = 0; k < shape->num_rois; ++k) {
    const float* roi = data + k * 5;
    for (int i = 0; i < 5; ++i) {
      if (!std::isfinite(roi[i])) {
        return errors::InvalidArgument("rois[", k, ", ", i,
                                       "] is not finite: ", roi[i]);
      }
    }
    // Beyond the bound, box extents overflow float (NaN sample positions) and
    // rounded or sampled positions overflow the integer types they are
    // converted to, which is undefined behaviour.
    for (int i = 1; i < 5; ++i) {
      const double scaled = static_cast<double>(roi[i]) * spatial_scale;
      if (std::abs(scaled) > kMaxScaledCoordinate) {
        return errors::InvalidArgument(
            "rois[", k, ", ", i, "] * spatial_scale = ", scaled,
            " is outside [-2^30, 2^30], far off any feature map (check the "
            "coordinates and spatial_scale)");
      }
    }
    const float index = roi[0];
    if (index != std::floor(index) || index < 0 ||
        index >= static_cast<float>(shape->batch)) {
      return errors::InvalidArgument(
          "rois[", k, ", 0] (batch index) must be an integer in [0, ",
          shape->batch, "), got ", index);
    }
  }
  return OkStatus();
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
  // Valid values v are -1 .. area - 1, so v + 1 (unsigned) is at most area.
  // Shards without an early exit vectorise, and split the memory traffic of
  // an input as large as the pooled tensor over the threads; only a failure
  // looks for the first bad value.
  const uint32_t limit = static_cast<uint32_t>(area);
  std::atomic<bool> bad(false);
  context->eigen_cpu_device().parallelFor(
      size, Eigen::TensorOpCost(sizeof(int32_t), 0, 2),
      [&](int64_t begin, int64_t end) {
        bool shard_bad = false;
        for (int64_t i = begin; i < end; ++i) {
          shard_bad |= static_cast<uint32_t>(values[i]) + 1u > limit;
        }
        if (shard_bad) bad = true;
      });
  if (!bad) return OkStatus();
  for (int64_t i = 0; i < size; ++i) {
    if (static_cast<uint32_t>(values[i]) + 1u > limit) {
      return errors::InvalidArgument("argmax[", i, "] = ", values[i],
                                     " is not -1 or a pixel index in [0, ",
                                     area, ")");
    }
  }
  return errors::Internal("argmax check found no bad value");
}

// Points call->rois at the validated rois where the kernel runs: on GPU a
// device copy, made once per call.
Status PlaceRois(OpKernelContext* context, const Tensor& rois,
                 const RoiKernelOptions& options, RoiCall* call) {
  call->rois = rois.flat<float>().data();
  if (!options.on_gpu || call->empty) return OkStatus();
  TF_RETURN_IF_ERROR(
      context->allocate_temp(DT_FLOAT, rois.shape(), &call->device_rois));
  float* device = call->device_rois.flat<float>().data();
  const CoreDevice core_device(context, /*on_gpu=*/true);
  TF_RETURN_IF_ERROR(
      CoreStatus(TfcoCopyToGpu(core_device.get(), call->rois, device,
                               rois.NumElements() * sizeof(float))));
  call->rois = device;
  return OkStatus();
}

// Fills call->args from the validated shape and attrs.
void SetArgs(const RoiShape& shape, const RoiAttrs& attrs, RoiCall* call) {
  call->args.attrs = attrs;
  call->args.shape = shape;
  call->args.features_layout =
      Layout::Make(attrs.nchw, shape.height, shape.width, shape.channels);
  call->args.pooled_layout = Layout::Make(
      attrs.nchw, attrs.pooled_height, attrs.pooled_width, shape.out_channels);
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
  SetArgs(shape, attrs, call);
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
  SetArgs(shape, attrs, call);
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
  SetArgs(shape, attrs, call);
  call->empty = shape.num_rois == 0;
  return PlaceRois(context, rois, options, call);
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
