#include "tensorflow_customops/core/kernels/roi/roi_args.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_join.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/util/overflow.h"

namespace tensorflow {
namespace customops {
namespace roi {

Status ReadRoiAttrs(OpKernelConstruction* context, RoiKind kind,
                    RoiAttrs* attrs) {
  attrs->kind = kind;
  TF_RETURN_IF_ERROR(context->GetAttr("pooled_height", &attrs->pooled_height));
  TF_RETURN_IF_ERROR(context->GetAttr("pooled_width", &attrs->pooled_width));
  TF_RETURN_IF_ERROR(context->GetAttr("spatial_scale", &attrs->spatial_scale));
  if (!std::isfinite(attrs->spatial_scale) || attrs->spatial_scale <= 0) {
    return errors::InvalidArgument(
        "spatial_scale must be finite and positive, got ",
        attrs->spatial_scale);
  }
  if (attrs->bilinear()) {
    TF_RETURN_IF_ERROR(
        context->GetAttr("sampling_ratio", &attrs->sampling_ratio));
    if (attrs->sampling_ratio > kMaxSamplingRatio) {
      return errors::InvalidArgument(
          "sampling_ratio must be at most ", kMaxSamplingRatio,
          " (or <= 0 for an adaptive grid), got ", attrs->sampling_ratio);
    }
    TF_RETURN_IF_ERROR(context->GetAttr("aligned", &attrs->aligned));
  }
  std::string data_format;
  TF_RETURN_IF_ERROR(context->GetAttr("data_format", &data_format));
  attrs->nchw = data_format == "NCHW";
  return OkStatus();
}

Status CheckBoxesDtype(DataType features, DataType boxes) {
  // BoxTypesOk's rule; Tboxes is float or double by the OpDef.
  if (boxes == DT_DOUBLE && features != DT_DOUBLE) {
    return errors::InvalidArgument(
        "rois are double (Tboxes) but features are ", DataTypeString(features),
        " (T): double rois need double features; cast the rois to float32 or "
        "the features to float64");
  }
  return OkStatus();
}

Status ReadBoxesDtype(OpKernelConstruction* context, DataType* boxes) {
  DataType features;
  TF_RETURN_IF_ERROR(context->GetAttr("T", &features));
  TF_RETURN_IF_ERROR(context->GetAttr("Tboxes", boxes));
  return CheckBoxesDtype(features, *boxes);
}

Status GetFeatureSizes(const TensorShape& features_shape, const RoiAttrs& attrs,
                       const char* arg_name, RoiShape* shape) {
  if (features_shape.dims() != 4) {
    return errors::InvalidArgument(
        arg_name, " must be 4-D (", attrs.nchw ? "NCHW" : "NHWC",
        "), got shape ", features_shape.DebugString());
  }
  shape->batch = features_shape.dim_size(0);
  shape->height = features_shape.dim_size(attrs.nchw ? 2 : 1);
  shape->width = features_shape.dim_size(attrs.nchw ? 3 : 2);
  shape->channels = features_shape.dim_size(attrs.nchw ? 1 : 3);
  // argmax stores h * width + w in an int32.
  const int64_t area = MultiplyWithoutOverflow(shape->height, shape->width);
  if (area < 0 || area > std::numeric_limits<int32_t>::max()) {
    return errors::InvalidArgument(arg_name,
                                   " height * width must be below 2^31, got ",
                                   shape->height, " * ", shape->width);
  }
  shape->out_channels = shape->channels;
  if (attrs.position_sensitive()) {
    const int64_t bins = attrs.bins();
    if (shape->channels % bins != 0) {
      return errors::InvalidArgument(
          arg_name, " channels (", shape->channels,
          ") must be divisible by the number of output bins pooled_height * "
          "pooled_width = ",
          bins);
    }
    shape->out_channels = shape->channels / bins;
  }
  return OkStatus();
}

Status CheckRoisShape(const TensorShape& rois_shape, RoiShape* shape) {
  if (rois_shape.dims() != 2 || rois_shape.dim_size(1) != 5) {
    return errors::InvalidArgument(
        "rois must have shape [K, 5] with rows (batch_index, x1, y1, x2, y2), "
        "got shape ",
        rois_shape.DebugString());
  }
  shape->num_rois = rois_shape.dim_size(0);
  return OkStatus();
}

Status ShapeFromDims(absl::Span<const int64_t> dims, const char* what,
                     TensorShape* out) {
  int64_t elements = 1;
  for (int64_t dim : dims) elements = MultiplyWithoutOverflow(elements, dim);
  if (elements < 0) {
    return errors::InvalidArgument(what, " [", absl::StrJoin(dims, ", "),
                                   "]: its number of elements overflows int64");
  }
  return TensorShape::BuildTensorShape(dims, out);
}

Status PooledShape(const RoiShape& shape, const RoiAttrs& attrs,
                   TensorShape* out) {
  const int64_t dims_nhwc[] = {shape.num_rois, attrs.pooled_height,
                               attrs.pooled_width, shape.out_channels};
  const int64_t dims_nchw[] = {shape.num_rois, shape.out_channels,
                               attrs.pooled_height, attrs.pooled_width};
  return ShapeFromDims(
      absl::Span<const int64_t>(attrs.nchw ? dims_nchw : dims_nhwc, 4),
      "pooled output", out);
}

Status FeaturesShapeFromValues(const TensorShape& input_shape,
                               absl::Span<const int64_t> values,
                               TensorShape* out) {
  if (input_shape.dims() != 1 || input_shape.num_elements() != 4) {
    return errors::InvalidArgument(
        "features_shape must be a vector of 4 elements, got shape ",
        input_shape.DebugString());
  }
  for (int i = 0; i < 4; ++i) {
    if (values[i] < 0) {
      return errors::InvalidArgument("features_shape[", i,
                                     "] must be non-negative, got ", values[i]);
    }
  }
  return ShapeFromDims(values, "features_shape", out);
}

Status CheckPooledGradShape(const TensorShape& grad_shape,
                            const RoiShape& shape, const RoiAttrs& attrs,
                            const char* arg_name) {
  TensorShape expected;
  TF_RETURN_IF_ERROR(PooledShape(shape, attrs, &expected));
  if (grad_shape != expected) {
    return errors::InvalidArgument(arg_name, " must have shape ",
                                   expected.DebugString(), ", got ",
                                   grad_shape.DebugString());
  }
  return OkStatus();
}

template <typename B>
Status CheckRoiValues(const B* rois, int64_t num_rois, int64_t batch,
                      float spatial_scale) {
  for (int64_t k = 0; k < num_rois; ++k) {
    const B* roi = rois + k * 5;
    if (RoiOk(roi, batch, spatial_scale)) continue;
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
    const B index = roi[0];
    if (index != std::floor(index) || index < 0 ||
        index >= static_cast<B>(batch)) {
      return errors::InvalidArgument(
          "rois[", k, ", 0] (batch index) must be an integer in [0, ", batch,
          "), got ", index);
    }
    return errors::Internal("rois[", k, "] fails RoiOk, but no check says why");
  }
  return OkStatus();
}
template Status CheckRoiValues(const float*, int64_t, int64_t, float);
template Status CheckRoiValues(const double*, int64_t, int64_t, float);

bool ArgmaxInRange(const int32_t* values, int64_t begin, int64_t end,
                   int64_t area) {
  // Valid values v are -1 .. area - 1, so v + 1 (unsigned) is at most area.
  const uint32_t limit = static_cast<uint32_t>(area);
  bool bad = false;
  for (int64_t i = begin; i < end; ++i) {
    bad |= static_cast<uint32_t>(values[i]) + 1u > limit;
  }
  return !bad;
}

Status ArgmaxError(const int32_t* values, int64_t size, int64_t area) {
  const uint32_t limit = static_cast<uint32_t>(area);
  for (int64_t i = 0; i < size; ++i) {
    if (static_cast<uint32_t>(values[i]) + 1u > limit) {
      return errors::InvalidArgument("argmax[", i, "] = ", values[i],
                                     " is not -1 or a pixel index in [0, ",
                                     area, ")");
    }
  }
  return OkStatus();
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
