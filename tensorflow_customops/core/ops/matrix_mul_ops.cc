// Op spec of CustomOps>MatrixMul: a type attr with restrictions and a default,
// bool attrs, and a shape function that checks the inner dimensions.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow_customops/core/ops/shape_util.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

Status MatrixMulShape(InferenceContext* c) {
  ShapeHandle a;
  ShapeHandle b;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
  bool transpose_a;
  bool transpose_b;
  TF_RETURN_IF_ERROR(c->GetAttr("transpose_a", &transpose_a));
  TF_RETURN_IF_ERROR(c->GetAttr("transpose_b", &transpose_b));
  const DimensionHandle rows = c->Dim(a, transpose_a ? 1 : 0);
  const DimensionHandle inner_a = c->Dim(a, transpose_a ? 0 : 1);
  const DimensionHandle inner_b = c->Dim(b, transpose_b ? 1 : 0);
  const DimensionHandle cols = c->Dim(b, transpose_b ? 0 : 1);
  DimensionHandle inner;
  if (!c->Merge(inner_a, inner_b, &inner).ok()) {
    return errors::InvalidArgument(
        "MatrixMul: inner dimensions differ: a ", c->DebugString(a),
        (transpose_a ? " (transposed)" : ""), " contributes ",
        c->DebugString(inner_a), ", b ", c->DebugString(b),
        (transpose_b ? " (transposed)" : ""), " contributes ",
        c->DebugString(inner_b));
  }
  const ShapeHandle product = c->Matrix(rows, cols);
  TF_RETURN_IF_ERROR(
      shape_util::CheckNumElements(c, product, "MatrixMul: the product"));
  c->set_output(0, product);
  return OkStatus();
}

}  // namespace

REGISTER_OP("CustomOps>MatrixMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {half, bfloat16, float, double} = DT_FLOAT")
    .SetShapeFn(MatrixMulShape)
    .Doc(R"doc(
Multiplies two matrices, either of which may be transposed first.

a: A matrix of shape `[m, k]`, or `[k, m]` if `transpose_a`.
b: A matrix of shape `[k, n]`, or `[n, k]` if `transpose_b`.
product: The `[m, n]` matrix `op(a) * op(b)`, where `op` transposes its
  argument when the matching attr is set.
transpose_a: Whether to use the transpose of `a`.
transpose_b: Whether to use the transpose of `b`.
T: The element type; half and bfloat16 products accumulate in float on GPU.
)doc");

}  // namespace tensorflow
