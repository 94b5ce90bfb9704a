// The RoI ops' argument rules, shared by their shape functions
// (core/ops/roi_ops.cc), their OpKernels (roi_glue) and their XLA lowerings,
// so that each rejects a bad call with the same message: the attrs and
// shapes, the shapes the kernels allocate, and the values of the inputs
// (batch indices, coordinates, argmax), which the regular kernels and the XLA
// custom calls check on the host before a kernel touches memory. Shapes
// are PartialTensorShapes (a TensorShape converts to one): a rule checks
// what is known of them, and -1 in a RoiShape is a size not known yet.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_SHAPE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_SHAPE_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Upper bound on sampling_ratio (python/ops/roi_checks.py mirrors it for the
// wrappers and layers, which check it before tracing).
constexpr int kMaxSamplingRatio = 64;

// Reads and checks the attrs of a `kind` op (spatial_scale normal and > 0,
// sampling_ratio <= kMaxSamplingRatio); pooled_height, pooled_width (>= 1)
// and data_format (NHWC or NCHW) are checked against the OpDef. Context is
// an InferenceContext or an OpKernelConstruction.
template <typename Context>
Status ReadRoiAttrs(Context* c, RoiKind kind, RoiAttrs* attrs) {
  attrs->kind = kind;
  TF_RETURN_IF_ERROR(c->GetAttr("pooled_height", &attrs->pooled_height));
  TF_RETURN_IF_ERROR(c->GetAttr("pooled_width", &attrs->pooled_width));
  TF_RETURN_IF_ERROR(c->GetAttr("spatial_scale", &attrs->spatial_scale));
  // Subnormals too: kernels run with them flushed to zero.
  if (!std::isnormal(attrs->spatial_scale) || attrs->spatial_scale < 0) {
    return errors::InvalidArgument(
        "spatial_scale must be finite and positive, at least 2^-126 (float's "
        "smallest normal number), got ",
        attrs->spatial_scale);
  }
  if (attrs->bilinear()) {
    TF_RETURN_IF_ERROR(c->GetAttr("sampling_ratio", &attrs->sampling_ratio));
    if (attrs->sampling_ratio > kMaxSamplingRatio) {
      return errors::InvalidArgument(
          "sampling_ratio must be at most ", kMaxSamplingRatio,
          " (or <= 0 for an adaptive grid), got ", attrs->sampling_ratio);
    }
    TF_RETURN_IF_ERROR(c->GetAttr("aligned", &attrs->aligned));
  }
  std::string data_format;
  TF_RETURN_IF_ERROR(c->GetAttr("data_format", &data_format));
  attrs->nchw = data_format == "NCHW";
  return OkStatus();
}

// Checks the boxes' type (attr Tboxes, float or double) against the
// features' (attr T): double boxes need double features (BoxTypesOk); the
// error names both.
Status CheckBoxesDtype(DataType features, DataType boxes);

// Reads Tboxes into *boxes, checked by CheckBoxesDtype.
template <typename Context>
Status ReadBoxesDtype(Context* c, DataType* boxes) {
  DataType features;
  TF_RETURN_IF_ERROR(c->GetAttr("T", &features));
  TF_RETURN_IF_ERROR(c->GetAttr("Tboxes", boxes));
  return CheckBoxesDtype(features, *boxes);
}

// `dims` as TensorShape::DebugString writes a shape ("[2,?,3]"), also where
// their product overflows and no shape can hold them.
std::string DimsString(absl::Span<const int64_t> dims);

// Fails, naming `what`, if the known `dims` multiply beyond int64: each dim
// may be valid while no tensor could have the shape.
Status CheckNumElements(absl::Span<const int64_t> dims, const char* what);

// Checks that `features` (named `arg_name`) is a 4-D shape in the attrs' data
// format whose height * width fits argmax's int32, and for position-sensitive
// ops that its channels divide into pooled_height * pooled_width groups.
// Fills the feature sizes of `shape`.
Status GetFeatureSizes(const PartialTensorShape& features,
                       const RoiAttrs& attrs, const char* arg_name,
                       RoiShape* shape);

// Checks that rois is [K, 5] and fills shape->num_rois.
Status CheckRoisShape(const PartialTensorShape& rois, RoiShape* shape);

// The pooled output's dims: [K, PH, PW, C] or [K, C, PH, PW].
std::array<int64_t, 4> PooledDims(const RoiShape& shape, const RoiAttrs& attrs);

// Checks that `grad` (a gradient op's incoming gradient, or RoiPoolGrad's
// argmax), named `arg_name`, has the pooled shape.
Status CheckPooledGradShape(const PartialTensorShape& grad,
                            const RoiShape& shape, const RoiAttrs& attrs,
                            const char* arg_name);

// Checks that a gradient op's features_shape input is a vector of 4.
Status CheckFeaturesShapeInput(const PartialTensorShape& input);

// Checks the values of the features_shape input: sizes of a shape that a
// tensor could have.
Status CheckFeaturesShapeValues(absl::Span<const int64_t> values);

// The pooled output shape (PooledDims) of a call whose sizes are known.
Status PooledShape(const RoiShape& shape, const RoiAttrs& attrs,
                   TensorShape* out);

// The feature shape a gradient op's features_shape input (of shape
// `input_shape`, holding `values`) describes, checked by
// CheckFeaturesShapeInput and CheckFeaturesShapeValues.
Status FeaturesShapeFromValues(const TensorShape& input_shape,
                               absl::Span<const int64_t> values,
                               TensorShape* out);

// Checks the values of `num_rois` boxes ([num_rois, 5], B float or double):
// every coordinate finite and, once scaled by spatial_scale, within
// kMaxScaledCoordinate; every batch index an integer in [0, batch).
template <typename B>
Status CheckRoiValues(const B* rois, int64_t num_rois, int64_t batch,
                      float spatial_scale);

// Whether every argmax value in [begin, end) is -1 or a pixel index in
// [0, area): the pixels RoiPoolGrad writes. Branch-free, so it vectorises.
bool ArgmaxInRange(const int32_t* values, int64_t begin, int64_t end,
                   int64_t area);

// The InvalidArgument naming the first argmax value out of range, or OK.
Status ArgmaxError(const int32_t* values, int64_t size, int64_t area);

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_SHAPE_H_
