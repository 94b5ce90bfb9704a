// Op specs of CustomOps>DeformableConv2d (modulated deformable convolution,
// DCNv2) and its gradient op. Semantics follow torchvision.ops.deform_conv2d;
// the attrs follow Conv2D's (strides, dilations and explicit_paddings in
// data_format order).

#include <array>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_shape.h"
#include "tensorflow_customops/core/ops/shape_util.h"

namespace tensorflow {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

namespace dc = customops::deform_conv2d;

// The dims of input `i`, `name` in errors: rank 4, or unknown rank (all -1).
Status Dims4(InferenceContext* c, int i, const char* name,
             std::array<int64_t, 4>* dims) {
  const ShapeHandle shape = c->input(i);
  if (c->RankKnown(shape) && c->Rank(shape) != 4) {
    return errors::InvalidArgument("DeformableConv2d: ", name,
                                   " must have rank 4, got shape ",
                                   c->DebugString(shape));
  }
  for (int d = 0; d < 4; ++d) {
    (*dims)[d] = c->RankKnown(shape) ? c->Value(c->Dim(shape, d))
                                     : InferenceContext::kUnknownDim;
  }
  return OkStatus();
}

// The attrs and geometry from inputs input (0), filter (1), offset (2) and
// mask (3); without use_mask, mask must be empty where its shape is known.
Status Geometry(InferenceContext* c, dc::Attrs* attrs, dc::Geometry* g) {
  TF_RETURN_IF_ERROR(dc::GetAttrs(c, attrs));
  std::array<int64_t, 4> input, filter, offset, mask{-1, -1, -1, -1};
  TF_RETURN_IF_ERROR(Dims4(c, 0, "input", &input));
  TF_RETURN_IF_ERROR(Dims4(c, 1, "filter", &filter));
  TF_RETURN_IF_ERROR(Dims4(c, 2, "offset", &offset));
  if (attrs->use_mask) {
    TF_RETURN_IF_ERROR(Dims4(c, 3, "mask", &mask));
  } else if (c->FullyDefined(c->input(3)) &&
             c->Value(c->NumElements(c->input(3))) != 0) {
    return errors::InvalidArgument(
        "DeformableConv2d: mask must be empty when use_mask is false, got ",
        c->DebugString(c->input(3)));
  }
  return dc::GetGeometry(*attrs, input, filter, offset, mask, g);
}

Status ForwardShape(InferenceContext* c) {
  dc::Attrs attrs;
  dc::Geometry g;
  TF_RETURN_IF_ERROR(Geometry(c, &attrs, &g));
  const ShapeHandle output = shape_util::MakeShape(c, dc::OutputDims(attrs, g));
  TF_RETURN_IF_ERROR(shape_util::CheckNumElements(c, output, "output"));
  c->set_output(0, output);
  return OkStatus();
}

Status GradShape(InferenceContext* c) {
  dc::Attrs attrs;
  dc::Geometry g;
  TF_RETURN_IF_ERROR(Geometry(c, &attrs, &g));
  std::array<int64_t, 4> grad;
  TF_RETURN_IF_ERROR(Dims4(c, 4, "grad_output", &grad));
  const auto want = dc::OutputDims(attrs, g);
  for (int d = 0; d < 4; ++d) {
    if (want[d] >= 0 && grad[d] >= 0 && want[d] != grad[d]) {
      return errors::InvalidArgument("DeformableConv2d: grad_output ",
                                     dc::Dims(grad),
                                     " must have the shape of "
                                     "the output, ",
                                     dc::Dims(want));
    }
  }
  for (int i = 0; i < 4; ++i) c->set_output(i, c->input(i));
  return OkStatus();
}

constexpr char kAttrDocs[] = R"doc(
input: [N, H, W, C] images (NCHW: [N, C, H, W]).
filter: [kh, kw, C / groups, O], as tf.nn.conv2d's; groups = C / filter's
  input channels, and O is a multiple of groups.
offset: [N, Ho, Wo, 2 * offset_groups * kh * kw] sample displacements (NCHW:
  [N, 2 * offset_groups * kh * kw, Ho, Wo], torchvision's layout): channel
  2k is the row (dy) and 2k + 1 the column (dx) displacement of tap
  k = (g * kh + i) * kw + j of offset group g.
mask: [N, Ho, Wo, offset_groups * kh * kw] factors of the samples (NCHW:
  channels second), used as given (no sigmoid); an empty tensor when
  use_mask is false.
strides: The stride of the output over the input, in data_format order; 1
  for the batch and channel dimensions.
padding: SAME and VALID as Conv2D; EXPLICIT takes explicit_paddings.
explicit_paddings: With EXPLICIT padding, 8 non-negative numbers: before and
  after each dimension, in data_format order (0 for batch and channels).
dilations: The filter's dilation, in data_format order; 1 for the batch and
  channel dimensions.
offset_groups: The number of offset groups, which divides C (channel c
  samples at the offsets of group c / (C / offset_groups)); 0 reads it from
  offset's channels at run time, as torchvision does.
data_format: NHWC or NCHW, for input, offset, mask and the output.
use_mask: Whether mask modulates the samples (DCNv2); false: DCNv1.
)doc";

}  // namespace

#define DEFORM_CONV2D_ATTRS                                     \
  Attr("T: {half, bfloat16, float, double} = DT_FLOAT")         \
      .Attr("strides: list(int) = [1, 1, 1, 1]")                \
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'} = 'VALID'") \
      .Attr("explicit_paddings: list(int) = []")                \
      .Attr("dilations: list(int) = [1, 1, 1, 1]")              \
      .Attr("offset_groups: int = 1")                           \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")           \
      .Attr("use_mask: bool = true")

REGISTER_OP("CustomOps>DeformableConv2d")
    .Input("input: T")
    .Input("filter: T")
    .Input("offset: T")
    .Input("mask: T")
    .Output("output: T")
    .DEFORM_CONV2D_ATTRS.SetShapeFn(ForwardShape)
    .Doc(std::string(R"doc(
Modulated deformable 2-D convolution (DCNv2), as
torchvision.ops.deform_conv2d: each filter tap reads the input at its
regular position plus a learned offset, bilinearly (0 outside the map),
times its mask.

Half and bfloat16 compute in float32 and round once.

output: [N, Ho, Wo, O] (NCHW: [N, O, Ho, Wo]); the bias is not part of the
  op.
)doc") + kAttrDocs);

REGISTER_OP("CustomOps>DeformableConv2dGrad")
    .Input("input: T")
    .Input("filter: T")
    .Input("offset: T")
    .Input("mask: T")
    .Input("grad_output: T")
    .Output("grad_input: T")
    .Output("grad_filter: T")
    .Output("grad_offset: T")
    .Output("grad_mask: T")
    .DEFORM_CONV2D_ATTRS.SetShapeFn(GradShape)
    .Doc(std::string(R"doc(
The gradients of DeformableConv2d with respect to its four inputs, as
torchvision's, given grad_output, the gradient of its output. The offset
gradient of a sample exactly on row -1 or column -1 is the one-sided
derivative from inside the map, as torchvision's (vision#6885).

grad_output: The gradient of DeformableConv2d's output.
grad_input: The gradient with respect to input.
grad_filter: The gradient with respect to filter.
grad_offset: The gradient with respect to offset.
grad_mask: The gradient with respect to mask (empty without use_mask).
)doc") + kAttrDocs);

}  // namespace tensorflow
