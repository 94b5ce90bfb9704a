// Op specs of CustomOps>ClipByGlobalNorm and its gradient op: N * T list
// inputs and outputs, a scalar input kept in host memory on GPU, and two
// outputs of different arities.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow_customops/core/ops/shape_util.h"

namespace tensorflow {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

Status ClipByGlobalNormShape(InferenceContext* c) {
  int n;
  TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(n), 0, &unused));
  for (int i = 0; i < n; ++i) c->set_output(i, c->input(i));
  c->set_output(n, c->Scalar());
  return OkStatus();
}

// Inputs: t[0..n), clip_norm, dclipped[0..n), dglobal_norm.
Status ClipByGlobalNormGradShape(InferenceContext* c) {
  int n;
  TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(n), 0, &unused));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2 * n + 1), 0, &unused));
  for (int i = 0; i < n; ++i) {
    ShapeHandle merged;
    TF_RETURN_IF_ERROR(c->Merge(c->input(i), c->input(n + 1 + i), &merged));
    // t[i] and dclipped[i] can each be valid with a shape no tensor can have.
    TF_RETURN_IF_ERROR(shape_util::CheckNumElements(c, merged, "dt"));
    c->set_output(i, merged);
  }
  c->set_output(n, c->Scalar());
  return OkStatus();
}

}  // namespace

REGISTER_OP("CustomOps>ClipByGlobalNorm")
    .Input("t: N * T")
    .Input("clip_norm: T")
    .Output("clipped: N * T")
    .Output("global_norm: T")
    .Attr("N: int >= 1")
    .Attr("T: {half, bfloat16, float, double} = DT_FLOAT")
    .SetShapeFn(ClipByGlobalNormShape)
    .Doc(R"doc(
Scales a list of tensors so that their joint L2 norm is at most clip_norm.

Computes the same values as `tf.clip_by_global_norm` in one op: the global
norm is the square root of the sum of squares of every element of every
tensor, and each tensor is multiplied by
`clip_norm * min(1 / global_norm, 1 / clip_norm)`. If the global norm is inf
or NaN, every output element is NaN.

t: The tensors to clip, of any shapes.
clip_norm: A scalar, the largest global norm the outputs may have. Kept in
  host memory by the GPU kernel.
clipped: The tensors `t`, each scaled by the same factor.
global_norm: The global norm of `t` before clipping, accumulated in double.
N: The number of tensors.
T: The element type of the tensors and of `clip_norm`.
)doc");

REGISTER_OP("CustomOps>ClipByGlobalNormGrad")
    .Input("t: N * T")
    .Input("clip_norm: T")
    .Input("dclipped: N * T")
    .Input("dglobal_norm: T")
    .Output("dt: N * T")
    .Output("dclip_norm: T")
    .Attr("N: int >= 1")
    .Attr("T: {half, bfloat16, float, double} = DT_FLOAT")
    .SetShapeFn(ClipByGlobalNormGradShape)
    .Doc(R"doc(
The gradient of CustomOps>ClipByGlobalNorm with respect to its inputs.

t: The forward op's input tensors.
clip_norm: The forward op's scalar clip norm. Kept in host memory by the GPU
  kernel.
dclipped: The gradients with respect to the forward op's `clipped` outputs,
  shaped like `t`.
dglobal_norm: The scalar gradient with respect to the forward op's
  `global_norm` output.
dt: The gradients with respect to `t`.
dclip_norm: The scalar gradient with respect to `clip_norm`.
N: The number of tensors.
T: The element type.
)doc");

}  // namespace tensorflow
