#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

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

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
