// Op specs of the RoI family for detection: RoiPool, RoiAlign, PsRoiPool,
// PsRoiAlign and their gradient ops. Semantics follow torchvision.ops; see
// core/kernels/roi/roi_geometry.h.

#include <string>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow_customops/core/kernels/roi/roi_args.h"
#include "tensorflow_customops/core/ops/shape_util.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

enum class Family { kPlain, kPositionSensitive };

Status GetLayout(InferenceContext* c, bool* nchw) {
  std::string data_format;
  TF_RETURN_IF_ERROR(c->GetAttr("data_format", &data_format));
  *nchw = data_format == "NCHW";
  return OkStatus();
}

// Channels of the pooled output from the feature map's channels.
Status PooledChannels(InferenceContext* c, Family family,
                      DimensionHandle channels, DimensionHandle* out) {
  if (family == Family::kPlain) {
    *out = channels;
    return OkStatus();
  }
  int pooled_height, pooled_width;
  TF_RETURN_IF_ERROR(c->GetAttr("pooled_height", &pooled_height));
  TF_RETURN_IF_ERROR(c->GetAttr("pooled_width", &pooled_width));
  return c->Divide(channels, static_cast<int64_t>(pooled_height) * pooled_width,
                   /*evenly_divisible=*/true, out);
}

Status MakePooledShape(InferenceContext* c, DimensionHandle num_rois,
                       DimensionHandle channels, ShapeHandle* out) {
  bool nchw;
  TF_RETURN_IF_ERROR(GetLayout(c, &nchw));
  int pooled_height, pooled_width;
  TF_RETURN_IF_ERROR(c->GetAttr("pooled_height", &pooled_height));
  TF_RETURN_IF_ERROR(c->GetAttr("pooled_width", &pooled_width));
  DimensionHandle ph = c->MakeDim(pooled_height);
  DimensionHandle pw = c->MakeDim(pooled_width);
  *out = nchw ? c->MakeShape({num_rois, channels, ph, pw})
              : c->MakeShape({num_rois, ph, pw, channels});
  return shape_util::CheckNumElements(c, *out, "pooled output");
}

// Double boxes need double features: coordinates are computed in the
// features' accumulation type.
Status CheckBoxesDtype(InferenceContext* c) {
  DataType features, boxes;
  TF_RETURN_IF_ERROR(c->GetAttr("T", &features));
  TF_RETURN_IF_ERROR(c->GetAttr("Tboxes", &boxes));
  return customops::roi::CheckBoxesDtype(features, boxes);
}

Status RoisNumRois(InferenceContext* c, int input, DimensionHandle* k) {
  ShapeHandle rois;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(input), 2, &rois));
  DimensionHandle unused;
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(rois, 1), 5, &unused));
  *k = c->Dim(rois, 0);
  return OkStatus();
}

// The pooled shape for `features` (rank 4, NHWC or NCHW) and the rois of
// input `rois_input`, and their number of boxes.
Status PooledShapeOf(InferenceContext* c, Family family, ShapeHandle features,
                     int rois_input, DimensionHandle* num_rois,
                     ShapeHandle* pooled) {
  TF_RETURN_IF_ERROR(CheckBoxesDtype(c));
  TF_RETURN_IF_ERROR(RoisNumRois(c, rois_input, num_rois));
  bool nchw;
  TF_RETURN_IF_ERROR(GetLayout(c, &nchw));
  DimensionHandle channels;
  TF_RETURN_IF_ERROR(
      PooledChannels(c, family, c->Dim(features, nchw ? 1 : 3), &channels));
  return MakePooledShape(c, *num_rois, channels, pooled);
}

// Forward: features [N, H, W, C] (or NCHW), rois [K, 5] -> pooled.
Status ForwardShape(InferenceContext* c, Family family) {
  ShapeHandle features, pooled;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &features));
  DimensionHandle num_rois;
  TF_RETURN_IF_ERROR(PooledShapeOf(c, family, features, 1, &num_rois, &pooled));
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, pooled);
  return OkStatus();
}

// Gradient: grads (pooled shape), rois, [argmax,] features_shape -> the
// features' shape, read from the features_shape tensor when it is constant.
Status GradShape(InferenceContext* c, Family family, int features_shape_input) {
  ShapeHandle features, pooled, unused;
  TF_RETURN_IF_ERROR(
      c->MakeShapeFromShapeTensor(features_shape_input, &features));
  TF_RETURN_IF_ERROR(c->WithRank(features, 4, &features));
  TF_RETURN_IF_ERROR(
      shape_util::CheckNumElements(c, features, "features_shape"));
  DimensionHandle num_rois;
  TF_RETURN_IF_ERROR(PooledShapeOf(c, family, features, 1, &num_rois, &pooled));
  TF_RETURN_IF_ERROR(c->Merge(c->input(0), pooled, &unused));
  c->set_output(0, features);
  return OkStatus();
}

// Box gradient: grads (pooled shape), features, rois -> rois' shape.
Status BoxGradShape(InferenceContext* c, Family family) {
  ShapeHandle features, pooled, unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &features));
  DimensionHandle num_rois;
  TF_RETURN_IF_ERROR(PooledShapeOf(c, family, features, 2, &num_rois, &pooled));
  TF_RETURN_IF_ERROR(c->Merge(c->input(0), pooled, &unused));
  c->set_output(0, c->Matrix(num_rois, 5));
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
      return ForwardShape(c, Family::kPlain);
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
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), c->input(2), &unused));
      return GradShape(c, Family::kPlain, 3);
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
      return ForwardShape(c, Family::kPlain);
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
      return GradShape(c, Family::kPlain, 2);
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
      return BoxGradShape(c, Family::kPlain);
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
      return ForwardShape(c, Family::kPositionSensitive);
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
      return GradShape(c, Family::kPositionSensitive, 2);
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
      return ForwardShape(c, Family::kPositionSensitive);
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
      return GradShape(c, Family::kPositionSensitive, 2);
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
      return BoxGradShape(c, Family::kPositionSensitive);
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
