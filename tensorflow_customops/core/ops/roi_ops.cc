// Op specs of the RoI family for detection: RoiPool, RoiAlign, PsRoiPool,
// PsRoiAlign and their gradient ops, registered per kind (RegisterKind), and
// their shape functions, which run the kernels' rules (roi_shape.h).
// Semantics follow torchvision.ops; see core/kernels/roi/roi_geometry.h.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

// ReadCall on the features of input `features_input` and the rois of the
// next input.
Status ReadInputsCall(InferenceContext* c, roi::RoiKind kind,
                      int features_input, roi::RoiAttrs* attrs,
                      roi::RoiShape* shape) {
  PartialTensorShape features;
  TF_RETURN_IF_ERROR(InputShape(c, features_input, &features));
  return ReadCall(c, kind, features, "features", features_input + 1, attrs,
                  shape);
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
  roi::RoiAttrs attrs;
  roi::RoiShape shape;
  TF_RETURN_IF_ERROR(ReadInputsCall(c, kind, 0, &attrs, &shape));
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
  roi::RoiAttrs attrs;
  roi::RoiShape shape;
  TF_RETURN_IF_ERROR(ReadInputsCall(c, kind, 1, &attrs, &shape));
  TF_RETURN_IF_ERROR(CheckPooledInput(c, 0, "grads", attrs, shape));
  c->set_output(0, c->Matrix(shape.num_rois, 5));
  return OkStatus();
}

// What tells the four kinds' ops apart; the rest of their specs is common.
struct KindSpec {
  const char* name;  // of the forward op, without the prefix
  roi::RoiKind kind;
  const char* aligned;  // the default of `aligned` (bilinear kinds)
  // Docs: the forward op's summary and description, the doc of its argmax
  // output (RoiPool) or aligned attr (bilinear kinds), the gradient op's and
  // the box gradient op's (bilinear kinds) summaries.
  const char* summary;
  const char* own_doc;
  const char* grad_summary;
  const char* grad_boxes_summary;
};

constexpr KindSpec kKinds[] = {
    {"RoiPool", roi::RoiKind::kPool, nullptr,
     R"doc(RoI max pooling (Fast R-CNN): each box is split into pooled_height x
pooled_width bins of whole pixels, and each bin takes the maximum.
)doc",
     R"doc(argmax: Same shape as pooled: h * W + w of the maximum within the box's feature
  map, or -1 for empty bins. Feeds RoiPoolGrad.
)doc",
     R"doc(Gradient of RoiPool with respect to features: each incoming gradient goes to
the position its bin's argmax names.
)doc",
     nullptr},
    {"RoiAlign", roi::RoiKind::kAlign, "false",
     R"doc(RoI Align (Mask R-CNN): each output bin averages bilinearly interpolated
samples on a regular grid inside the bin, with no rounding of box coordinates.
)doc",
     R"doc(aligned: Shift box coordinates by -0.5 pixel so that pixel centres align
  (recommended); false keeps the original, misaligned behaviour.
)doc",
     R"doc(Gradient of RoiAlign with respect to features: each incoming gradient is spread
over the pixels its bilinear samples read, with the same weights.
)doc",
     R"doc(Gradient of RoiAlign with respect to the box coordinates, at the sampling grid
the boxes give (the grid's size does not move with them), as CropAndResize's
box gradient. Bilinear interpolation is not differentiable where a sample
crosses a pixel row or column; there the slope of the pixel it lies in is
taken.
)doc"},
    {"PsRoiPool", roi::RoiKind::kPsPool, nullptr,
     R"doc(Position-sensitive RoI average pooling (R-FCN): output channel c of bin
(i, j) averages input channel (c * pooled_height + i) * pooled_width + j over
the bin's whole pixels.
)doc",
     "", "Gradient of PsRoiPool with respect to features.\n", nullptr},
    {"PsRoiAlign", roi::RoiKind::kPsAlign, "true",
     R"doc(Position-sensitive RoI Align: PsRoiPool's channel selection with RoiAlign's
bilinear sampling.
)doc",
     R"doc(aligned: Shift box coordinates by -0.5 pixel (the default, as torchvision's
  ps_roi_align); false samples at the unshifted coordinates. Unlike RoiAlign,
  small boxes are never enlarged to 1x1.
)doc",
     "Gradient of PsRoiAlign with respect to features.\n",
     R"doc(Gradient of PsRoiAlign with respect to the box coordinates, as
RoiAlignGradBoxes.
)doc"},
};

constexpr char kRoisDoc[] =
    R"doc(rois: Boxes, [K, 5] rows (batch_index, x1, y1, x2, y2) in input-image
  coordinates; spatial_scale maps them onto the feature map. Float, or double
  with double features: the box geometry is computed in the features'
  accumulation type (float for half, bfloat16 and float).
)doc";

constexpr char kAttrDocs[] = R"doc(pooled_height: Output bins along the height.
pooled_width: Output bins along the width.
spatial_scale: Factor from box coordinates to feature-map coordinates.
data_format: Layout of features and pooled.
)doc";

// The attrs every op of `k` has, and its shape function.
register_op::OpDefBuilderWrapper& Common(register_op::OpDefBuilderWrapper& op,
                                         const KindSpec& k,
                                         OpShapeInferenceFn shape_fn) {
  op.Attr("pooled_height: int >= 1")
      .Attr("pooled_width: int >= 1")
      .Attr("spatial_scale: float = 1.0")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("T: {half, bfloat16, float, double} = DT_FLOAT")
      .Attr("Tboxes: {float, double} = DT_FLOAT");
  if (k.aligned != nullptr) {
    op.Attr("sampling_ratio: int = -1")
        .Attr(absl::StrCat("aligned: bool = ", k.aligned));
  }
  return op.SetShapeFn(std::move(shape_fn));
}

// Registers the ops of `k`: the forward op, its gradient op and, for the
// bilinear kinds, its box gradient op.
void RegisterKind(const KindSpec& k) {
  const roi::RoiKind kind = k.kind;
  const bool ps =
      kind == roi::RoiKind::kPsPool || kind == roi::RoiKind::kPsAlign;
  const bool pool = kind == roi::RoiKind::kPool;
  const std::string name = absl::StrCat("CustomOps>", k.name);
  const std::string sampling_doc =
      k.aligned == nullptr
          ? ""
          : absl::StrCat(
                "sampling_ratio: Sampling points per bin along each axis; <= 0 "
                "picks\n  ceil(bin size) adaptively. At most ",
                roi::kMaxSamplingRatio, ".\n");

  register_op::OpDefBuilderWrapper forward(name.c_str());
  forward.Input("features: T").Input("rois: Tboxes").Output("pooled: T");
  if (pool) forward.Output("argmax: int32");
  Common(forward, k,
         [kind](InferenceContext* c) { return ForwardShape(c, kind); })
      .Doc(absl::StrCat(
          "\n", k.summary, "\nfeatures: The feature map, ",
          ps ? "[N, H, W, C] (or NCHW) with C divisible by\n  pooled_height * "
               "pooled_width.\n"
             : "[N, H, W, C] (NHWC) or [N, C, H, W] (NCHW).\n",
          kRoisDoc,
          ps ? "pooled: [K, pooled_height, pooled_width, C / (pooled_height * "
               "pooled_width)]\n  (or NCHW)"
             : "pooled: [K, pooled_height, pooled_width, C] (or [K, C, "
               "pooled_height,\n  pooled_width])",
          k.aligned == nullptr ? "; 0 for empty bins.\n" : ".\n", k.own_doc,
          kAttrDocs, sampling_doc));
  forward();

  // RoiPool has two outputs: its gradient's grads are of the pooled one.
  const std::string of =
      absl::StrCat(k.name, pool ? "'s pooled output" : "'s output");
  register_op::OpDefBuilderWrapper grad((name + "Grad").c_str());
  grad.Input("grads: T").Input("rois: Tboxes");
  if (pool) grad.Input("argmax: int32");
  grad.Input("features_shape: int32").Output("grad_features: T");
  Common(grad, k, [kind](InferenceContext* c) { return GradShape(c, kind); })
      .Doc(absl::StrCat(
          "\n", k.grad_summary, "\ngrads: Gradient with respect to ", of,
          ".\nrois: The boxes given to ", k.name, ".\n",
          pool ? "argmax: RoiPool's argmax output.\n" : "",
          "features_shape: Shape of ", k.name,
          "'s features, int32 [4].\ngrad_features: Gradient with respect to "
          "features.\n"));
  grad();

  if (k.grad_boxes_summary == nullptr) return;
  register_op::OpDefBuilderWrapper grad_boxes((name + "GradBoxes").c_str());
  grad_boxes.Input("grads: T")
      .Input("features: T")
      .Input("rois: Tboxes")
      .Output("grad_rois: Tboxes");
  Common(grad_boxes, k,
         [kind](InferenceContext* c) { return BoxGradShape(c, kind); })
      .Doc(absl::StrCat(
          "\n", k.grad_boxes_summary, "\ngrads: Gradient with respect to ", of,
          ".\nfeatures: The features given to ", k.name,
          ".\nrois: The boxes given to ", k.name,
          ".\ngrad_rois: Gradient with respect to rois, [K, 5] of "
          "their type; the batch\n  index column is 0.\n"));
  grad_boxes();
}

const bool kRegistered = [] {
  for (const KindSpec& k : kKinds) RegisterKind(k);
  return true;
}();

}  // namespace

}  // namespace tensorflow
