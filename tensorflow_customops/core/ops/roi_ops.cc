// Op specs of the RoI family for detection: RoiPool, RoiAlign, PsRoiPool,
// PsRoiAlign and their gradient ops, whose shape functions run the kernels'
// rules (roi_shape.h). Semantics follow torchvision.ops; see
// core/kernels/roi/roi_geometry.h.

#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/roi/roi_shape.h"
#include "tensorflow_customops/core/ops/shape_util.h"

namespace tensorflow {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

namespace roi = customops::roi;

// Input `i`'s shape as the rules (roi_shape.h) read it.
Status InputShape(InferenceContext* c, int i, PartialTensorShape* shape) {
  return shape_util::PartialShape(c, c->input(i), shape);
}

// The attrs and sizes of a `kind` call on `features` (named `features_name`)
// and the rois of input `rois_input`, checked by the kernels' rules.
Status ReadCall(InferenceContext* c, roi::RoiKind kind,
                const PartialTensorShape& features, const char* features_name,
                int rois_input, roi::RoiAttrs* attrs, roi::RoiShape* shape) {
  TF_RETURN_IF_ERROR(roi::ReadRoiAttrs(c, kind, attrs));
  DataType boxes;
  TF_RETURN_IF_ERROR(roi::ReadBoxesDtype(c, &boxes));
  TF_RETURN_IF_ERROR(
      roi::GetFeatureSizes(features, *attrs, features_name, shape));
  PartialTensorShape rois;
  TF_RETURN_IF_ERROR(InputShape(c, rois_input, &rois));
  TF_RETURN_IF_ERROR(roi::CheckRoisShape(rois, shape));
  return roi::CheckNumElements(roi::PooledDims(*shape, *attrs),
                               "pooled output");
}

// Checks that input `i`, named `name`, has the pooled shape.
Status CheckPooledInput(InferenceContext* c, int i, const char* name,
                        const roi::RoiAttrs& attrs,
                        const roi::RoiShape& shape) {
  PartialTensorShape input;
  TF_RETURN_IF_ERROR(InputShape(c, i, &input));
  return roi::CheckPooledGradShape(input, shape, attrs, name);
}

// Forward: features [N, H, W, C] (or NCHW), rois [K, 5] -> pooled (and
// RoiPool's argmax, of the same shape).
Status ForwardShape(InferenceContext* c, roi::RoiKind kind) {
  PartialTensorShape features;
  TF_RETURN_IF_ERROR(InputShape(c, 0, &features));
  roi::RoiAttrs attrs;
  roi::RoiShape shape;
  TF_RETURN_IF_ERROR(
      ReadCall(c, kind, features, "features", 1, &attrs, &shape));
  const ShapeHandle pooled =
      shape_util::MakeShape(c, roi::PooledDims(shape, attrs));
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, pooled);
  return OkStatus();
}

// The features' shape that a gradient op's features_shape input (the last)
// gives: all of it where its value is known, else what is known of it.
Status FeaturesShapeInput(InferenceContext* c, ShapeHandle* features) {
  const int i = c->num_inputs() - 1;
  const Tensor* value = c->input_tensor(i);
  if (value == nullptr) {
    PartialTensorShape input;
    TF_RETURN_IF_ERROR(InputShape(c, i, &input));
    TF_RETURN_IF_ERROR(roi::CheckFeaturesShapeInput(input));
    return c->MakeShapeFromShapeTensor(i, features);
  }
  TF_RETURN_IF_ERROR(roi::CheckFeaturesShapeInput(value->shape()));
  const auto v = value->vec<int32_t>();
  const std::vector<int64_t> dims(v.data(), v.data() + v.size());
  TF_RETURN_IF_ERROR(roi::CheckFeaturesShapeValues(dims));
  *features = shape_util::MakeShape(c, dims);
  return OkStatus();
}

// Gradient: grads (pooled shape), rois, [argmax,] features_shape -> the
// features' shape.
Status GradShape(InferenceContext* c, roi::RoiKind kind) {
  ShapeHandle features;
  TF_RETURN_IF_ERROR(FeaturesShapeInput(c, &features));
  PartialTensorShape features_shape;
  TF_RETURN_IF_ERROR(shape_util::PartialShape(c, features, &features_shape));
  roi::RoiAttrs attrs;
  roi::RoiShape shape;
  TF_RETURN_IF_ERROR(
      ReadCall(c, kind, features_shape, "features_shape", 1, &attrs, &shape));
  TF_RETURN_IF_ERROR(CheckPooledInput(c, 0, "grads", attrs, shape));
  if (kind == roi::RoiKind::kPool) {
    TF_RETURN_IF_ERROR(CheckPooledInput(c, 2, "argmax", attrs, shape));
  }
  c->set_output(0, features);
  return OkStatus();
}

// Box gradient: grads (pooled shape), features, rois -> rois' shape.
Status BoxGradShape(InferenceContext* c, roi::RoiKind kind) {
  PartialTensorShape features;
  TF_RETURN_IF_ERROR(InputShape(c, 1, &features));
  roi::RoiAttrs attrs;
  roi::RoiShape shape;
  TF_RETURN_IF_ERROR(
      ReadCall(c, kind, features, "features", 2, &attrs, &shape));
  TF_RETURN_IF_ERROR(CheckPooledInput(c, 0, "grads", attrs, shape));
  c->set_output(0, c->Matrix(shape.num_rois, 5));
  return OkStatus();
}

}  // namespace

#define TFCO_ROI_COMMON_ATTRS                                \
  Attr("pooled_height: int >= 1")                            \
      .Attr("pooled_width: int >= 1")                        \
      .Attr("spatial_scale: float = 1.0")                    \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")        \
      .Attr("T: {half, bfloat16, float, double} = DT_FLOAT") \
      .Attr("Tboxes: {float, double} = DT_FLOAT")

REGISTER_OP("CustomOps>RoiPool")
    .Input("features: T")
    .Input("rois: Tboxes")
    .Output("pooled: T")
    .Output("argmax: int32")
    .TFCO_ROI_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      return ForwardShape(c, roi::RoiKind::kPool);
    })
    .Doc(R"doc(
RoI max pooling (Fast R-CNN): each box is split into pooled_height x
pooled_width bins of whole pixels, and each bin takes the maximum.

features: The feature map, [N, H, W, C] (NHWC) or [N, C, H, W] (NCHW).
rois: Boxes, [K, 5] rows (batch_index, x1, y1, x2, y2) in input-image
  coordinates; spatial_scale maps them onto the feature map. Float, or double
  with double features: the box geometry is computed in the features'
  accumulation type (float for half, bfloat16 and float).
pooled: [K, pooled_height, pooled_width, C] (or [K, C, pooled_height,
  pooled_width]); 0 for empty bins.
argmax: Same shape as pooled: h * W + w of the maximum within the box's feature
  map, or -1 for empty bins. Feeds RoiPoolGrad.
pooled_height: Output bins along the height.
pooled_width: Output bins along the width.
spatial_scale: Factor from box coordinates to feature-map coordinates.
data_format: Layout of features and pooled.
)doc");

REGISTER_OP("CustomOps>RoiPoolGrad")
    .Input("grads: T")
    .Input("rois: Tboxes")
    .Input("argmax: int32")
    .Input("features_shape: int32")
    .Output("grad_features: T")
    .TFCO_ROI_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      return GradShape(c, roi::RoiKind::kPool);
    })
    .Doc(R"doc(
Gradient of RoiPool with respect to features: each incoming gradient goes to
the position its bin's argmax names.

grads: Gradient with respect to RoiPool's pooled output.
rois: The boxes given to RoiPool.
argmax: RoiPool's argmax output.
features_shape: Shape of RoiPool's features, int32 [4].
grad_features: Gradient with respect to features.
)doc");

REGISTER_OP("CustomOps>RoiAlign")
    .Input("features: T")
    .Input("rois: Tboxes")
    .Output("pooled: T")
    .TFCO_ROI_COMMON_ATTRS.Attr("sampling_ratio: int = -1")
    .Attr("aligned: bool = false")
    .SetShapeFn([](InferenceContext* c) {
      return ForwardShape(c, roi::RoiKind::kAlign);
    })
    .Doc(R"doc(
RoI Align (Mask R-CNN): each output bin averages bilinearly interpolated
samples on a regular grid inside the bin, with no rounding of box coordinates.

features: The feature map, [N, H, W, C] (NHWC) or [N, C, H, W] (NCHW).
rois: Boxes, [K, 5] rows (batch_index, x1, y1, x2, y2) in input-image
  coordinates; spatial_scale maps them onto the feature map. Float, or double
  with double features: the box geometry is computed in the features'
  accumulation type (float for half, bfloat16 and float).
pooled: [K, pooled_height, pooled_width, C] (or [K, C, pooled_height,
  pooled_width]).
pooled_height: Output bins along the height.
pooled_width: Output bins along the width.
spatial_scale: Factor from box coordinates to feature-map coordinates.
sampling_ratio: Sampling points per bin along each axis; <= 0 picks
  ceil(bin size) adaptively. At most 64.
aligned: Shift box coordinates by -0.5 pixel so that pixel centres align
  (recommended); false keeps the original, misaligned behaviour.
data_format: Layout of features and pooled.
)doc");

REGISTER_OP("CustomOps>RoiAlignGrad")
    .Input("grads: T")
    .Input("rois: Tboxes")
    .Input("features_shape: int32")
    .Output("grad_features: T")
    .TFCO_ROI_COMMON_ATTRS.Attr("sampling_ratio: int = -1")
    .Attr("aligned: bool = false")
    .SetShapeFn([](InferenceContext* c) {
      return GradShape(c, roi::RoiKind::kAlign);
    })
    .Doc(R"doc(
Gradient of RoiAlign with respect to features: each incoming gradient is spread
over the pixels its bilinear samples read, with the same weights.

grads: Gradient with respect to RoiAlign's output.
rois: The boxes given to RoiAlign.
features_shape: Shape of RoiAlign's features, int32 [4].
grad_features: Gradient with respect to features.
)doc");

REGISTER_OP("CustomOps>RoiAlignGradBoxes")
    .Input("grads: T")
    .Input("features: T")
    .Input("rois: Tboxes")
    .Output("grad_rois: Tboxes")
    .TFCO_ROI_COMMON_ATTRS.Attr("sampling_ratio: int = -1")
    .Attr("aligned: bool = false")
    .SetShapeFn([](InferenceContext* c) {
      return BoxGradShape(c, roi::RoiKind::kAlign);
    })
    .Doc(R"doc(
Gradient of RoiAlign with respect to the box coordinates, at the sampling grid
the boxes give (the grid's size does not move with them), as CropAndResize's
box gradient. Bilinear interpolation is not differentiable where a sample
crosses a pixel row or column; there the slope of the pixel it lies in is
taken.

grads: Gradient with respect to RoiAlign's output.
features: The features given to RoiAlign.
rois: The boxes given to RoiAlign.
grad_rois: Gradient with respect to rois, [K, 5] of their type; the batch
  index column is 0.
)doc");

REGISTER_OP("CustomOps>PsRoiPool")
    .Input("features: T")
    .Input("rois: Tboxes")
    .Output("pooled: T")
    .TFCO_ROI_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      return ForwardShape(c, roi::RoiKind::kPsPool);
    })
    .Doc(R"doc(
Position-sensitive RoI average pooling (R-FCN): output channel c of bin
(i, j) averages input channel (c * pooled_height + i) * pooled_width + j over
the bin's whole pixels.

features: The feature map, [N, H, W, C] (or NCHW) with C divisible by
  pooled_height * pooled_width.
rois: Boxes, [K, 5] rows (batch_index, x1, y1, x2, y2) in input-image
  coordinates; spatial_scale maps them onto the feature map. Float, or double
  with double features: the box geometry is computed in the features'
  accumulation type (float for half, bfloat16 and float).
pooled: [K, pooled_height, pooled_width, C / (pooled_height * pooled_width)]
  (or NCHW); 0 for empty bins.
pooled_height: Output bins along the height.
pooled_width: Output bins along the width.
spatial_scale: Factor from box coordinates to feature-map coordinates.
data_format: Layout of features and pooled.
)doc");

REGISTER_OP("CustomOps>PsRoiPoolGrad")
    .Input("grads: T")
    .Input("rois: Tboxes")
    .Input("features_shape: int32")
    .Output("grad_features: T")
    .TFCO_ROI_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      return GradShape(c, roi::RoiKind::kPsPool);
    })
    .Doc(R"doc(
Gradient of PsRoiPool with respect to features.

grads: Gradient with respect to PsRoiPool's output.
rois: The boxes given to PsRoiPool.
features_shape: Shape of PsRoiPool's features, int32 [4].
grad_features: Gradient with respect to features.
)doc");

REGISTER_OP("CustomOps>PsRoiAlign")
    .Input("features: T")
    .Input("rois: Tboxes")
    .Output("pooled: T")
    .TFCO_ROI_COMMON_ATTRS.Attr("sampling_ratio: int = -1")
    .Attr("aligned: bool = true")
    .SetShapeFn([](InferenceContext* c) {
      return ForwardShape(c, roi::RoiKind::kPsAlign);
    })
    .Doc(R"doc(
Position-sensitive RoI Align: PsRoiPool's channel selection with RoiAlign's
bilinear sampling.

features: The feature map, [N, H, W, C] (or NCHW) with C divisible by
  pooled_height * pooled_width.
rois: Boxes, [K, 5] rows (batch_index, x1, y1, x2, y2) in input-image
  coordinates; spatial_scale maps them onto the feature map. Float, or double
  with double features: the box geometry is computed in the features'
  accumulation type (float for half, bfloat16 and float).
pooled: [K, pooled_height, pooled_width, C / (pooled_height * pooled_width)]
  (or NCHW).
pooled_height: Output bins along the height.
pooled_width: Output bins along the width.
spatial_scale: Factor from box coordinates to feature-map coordinates.
sampling_ratio: Sampling points per bin along each axis; <= 0 picks
  ceil(bin size) adaptively. At most 64.
aligned: Shift box coordinates by -0.5 pixel (the default, as torchvision's
  ps_roi_align); false samples at the unshifted coordinates. Unlike RoiAlign,
  small boxes are never enlarged to 1x1.
data_format: Layout of features and pooled.
)doc");

REGISTER_OP("CustomOps>PsRoiAlignGrad")
    .Input("grads: T")
    .Input("rois: Tboxes")
    .Input("features_shape: int32")
    .Output("grad_features: T")
    .TFCO_ROI_COMMON_ATTRS.Attr("sampling_ratio: int = -1")
    .Attr("aligned: bool = true")
    .SetShapeFn([](InferenceContext* c) {
      return GradShape(c, roi::RoiKind::kPsAlign);
    })
    .Doc(R"doc(
Gradient of PsRoiAlign with respect to features.

grads: Gradient with respect to PsRoiAlign's output.
rois: The boxes given to PsRoiAlign.
features_shape: Shape of PsRoiAlign's features, int32 [4].
grad_features: Gradient with respect to features.
)doc");

REGISTER_OP("CustomOps>PsRoiAlignGradBoxes")
    .Input("grads: T")
    .Input("features: T")
    .Input("rois: Tboxes")
    .Output("grad_rois: Tboxes")
    .TFCO_ROI_COMMON_ATTRS.Attr("sampling_ratio: int = -1")
    .Attr("aligned: bool = true")
    .SetShapeFn([](InferenceContext* c) {
      return BoxGradShape(c, roi::RoiKind::kPsAlign);
    })
    .Doc(R"doc(
Gradient of PsRoiAlign with respect to the box coordinates, as
RoiAlignGradBoxes.

grads: Gradient with respect to PsRoiAlign's output.
features: The features given to PsRoiAlign.
rois: The boxes given to PsRoiAlign.
grad_rois: Gradient with respect to rois, [K, 5] of their type; the batch
  index column is 0.
)doc");

#undef TFCO_ROI_COMMON_ATTRS

}  // namespace tensorflow
