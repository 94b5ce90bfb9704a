// Attribute parsing and shape checks of the RoI ops, shared by their regular
// kernels and their XLA lowerings so that both reject bad attrs and shapes
// with the same messages, and the checks of their values (batch indices,
// coordinates, argmax), which the regular kernels and the XLA custom calls
// run on the host before a kernel touches memory.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ARGS_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ARGS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Reads and checks the attrs of a `kind` op (spatial_scale finite and > 0,
// sampling_ratio <= kMaxSamplingRatio). pooled_height, pooled_width (>= 1)
// and data_format (NHWC or NCHW) are already checked against the OpDef.
Status ReadRoiAttrs(OpKernelConstruction* context, RoiKind kind,
                    RoiAttrs* attrs);

// Checks the boxes' type (attr Tboxes, float or double) against the
// features' (attr T): double boxes need double features (BoxTypesOk); the
// error names both. The shape functions run it too.
Status CheckBoxesDtype(DataType features, DataType boxes);

// Reads Tboxes into *boxes, checked by CheckBoxesDtype.
Status ReadBoxesDtype(OpKernelConstruction* context, DataType* boxes);

// Checks that `features_shape` is a rank-4 shape in the attrs' data format and
// fills the feature sizes of `shape`; for position-sensitive ops also checks
// that the channels divide into pooled_height * pooled_width groups.
Status GetFeatureSizes(const TensorShape& features_shape, const RoiAttrs& attrs,
                       const char* arg_name, RoiShape* shape);

// Checks that rois is [K, 5] and fills shape->num_rois.
Status CheckRoisShape(const TensorShape& rois_shape, RoiShape* shape);

// The shape with sizes `dims`, or an InvalidArgument naming `what` if its
// number of elements overflows int64 (each dim fits, their product need not).
Status ShapeFromDims(absl::Span<const int64_t> dims, const char* what,
                     TensorShape* out);

// The pooled output shape: [K, PH, PW, C] or [K, C, PH, PW].
Status PooledShape(const RoiShape& shape, const RoiAttrs& attrs,
                   TensorShape* out);

// The feature shape a gradient op's features_shape input (of shape
// `input_shape`, holding `values`) describes.
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

// Checks that a gradient op's incoming gradient has the pooled shape.
Status CheckPooledGradShape(const TensorShape& grad_shape,
                            const RoiShape& shape, const RoiAttrs& attrs,
                            const char* arg_name);

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ARGS_H_
