#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "tensorflow/core/util/overflow.h"

namespace tensorflow {
namespace customops {
namespace roi {

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

std::string DimsString(absl::Span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    absl::StrAppend(&s, i ? "," : "",
                    dims[i] < 0 ? std::string("?") : absl::StrCat(dims[i]));
  }
  return s + "]";
}

Status CheckNumElements(absl::Span<const int64_t> dims, const char* what) {
  int64_t elements = 1;
  for (int64_t dim : dims) {
    if (dim >= 0) elements = MultiplyWithoutOverflow(elements, dim);
  }
  if (elements < 0) {
    return errors::InvalidArgument(what, " ", DimsString(dims),
                                   ": its number of elements overflows int64");
  }
  return OkStatus();
}

Status GetFeatureSizes(const PartialTensorShape& features,
                       const RoiAttrs& attrs, const char* arg_name,
                       RoiShape* shape) {
  if (!features.unknown_rank() && features.dims() != 4) {
    return errors::InvalidArgument(arg_name, " must be 4-D (",
                                   attrs.nchw ? "NCHW" : "NHWC",
                                   "), got shape ", features.DebugString());
  }
  auto dim = [&](int i) {
    return features.unknown_rank() ? int64_t{-1} : features.dim_size(i);
  };
  shape->batch = dim(0);
  shape->height = dim(attrs.nchw ? 2 : 1);
  shape->width = dim(attrs.nchw ? 3 : 2);
  shape->channels = dim(attrs.nchw ? 1 : 3);
  // argmax stores h * width + w in an int32.
  if (shape->height >= 0 && shape->width >= 0) {
    const int64_t area = MultiplyWithoutOverflow(shape->height, shape->width);
    if (area < 0 || area > std::numeric_limits<int32_t>::max()) {
      return errors::InvalidArgument(arg_name,
                                     " height * width must be below 2^31, got ",
                                     shape->height, " * ", shape->width);
    }
  }
  shape->out_channels = shape->channels;
  if (attrs.position_sensitive() && shape->channels >= 0) {
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

Status CheckRoisShape(const PartialTensorShape& rois, RoiShape* shape) {
  if (!rois.unknown_rank() &&
      (rois.dims() != 2 || (rois.dim_size(1) >= 0 && rois.dim_size(1) != 5))) {
    return errors::InvalidArgument(
        "rois must have shape [K, 5] with rows (batch_index, x1, y1, x2, y2), "
        "got shape ",
        rois.DebugString());
  }
  shape->num_rois = rois.unknown_rank() ? -1 : rois.dim_size(0);
  return OkStatus();
}

std::array<int64_t, 4> PooledDims(const RoiShape& shape,
                                  const RoiAttrs& attrs) {
  if (attrs.nchw) {
    return {shape.num_rois, shape.out_channels, attrs.pooled_height,
            attrs.pooled_width};
  }
  return {shape.num_rois, attrs.pooled_height, attrs.pooled_width,
          shape.out_channels};
}

Status CheckPooledGradShape(const PartialTensorShape& grad,
                            const RoiShape& shape, const RoiAttrs& attrs,
                            const char* arg_name) {
  const std::array<int64_t, 4> pooled = PooledDims(shape, attrs);
  bool matches = grad.unknown_rank() || grad.dims() == 4;
  for (int i = 0; matches && !grad.unknown_rank() && i < 4; ++i) {
    const int64_t dim = grad.dim_size(i);
    matches = dim < 0 || pooled[i] < 0 || dim == pooled[i];
  }
  if (!matches) {
    return errors::InvalidArgument(arg_name, " must have shape ",
                                   DimsString(pooled), ", got ",
                                   grad.DebugString());
  }
  return OkStatus();
}

Status CheckFeaturesShapeInput(const PartialTensorShape& input) {
  if (!input.unknown_rank() &&
      (input.dims() != 1 ||
       (input.dim_size(0) >= 0 && input.dim_size(0) != 4))) {
    return errors::InvalidArgument(
        "features_shape must be a vector of 4 elements, got shape ",
        input.DebugString());
  }
  return OkStatus();
}

Status CheckFeaturesShapeValues(absl::Span<const int64_t> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      return errors::InvalidArgument("features_shape[", i,
                                     "] must be non-negative, got ", values[i]);
    }
  }
  return CheckNumElements(values, "features_shape");
}

Status PooledShape(const RoiShape& shape, const RoiAttrs& attrs,
                   TensorShape* out) {
  const std::array<int64_t, 4> dims = PooledDims(shape, attrs);
  TF_RETURN_IF_ERROR(CheckNumElements(dims, "pooled output"));
  return TensorShape::BuildTensorShape(dims, out);
}

Status FeaturesShapeFromValues(const TensorShape& input_shape,
                               absl::Span<const int64_t> values,
                               TensorShape* out) {
  TF_RETURN_IF_ERROR(CheckFeaturesShapeInput(input_shape));
  TF_RETURN_IF_ERROR(CheckFeaturesShapeValues(values));
  return TensorShape::BuildTensorShape(values, out);
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
