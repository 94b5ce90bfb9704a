// Checks shared by the shape functions.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_OPS_SHAPE_UTIL_H_
#define TENSORFLOW_CUSTOMOPS_CORE_OPS_SHAPE_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/util/overflow.h"

namespace tensorflow {
namespace shape_util {

// Fails, naming `what`, if the known dims of `shape` multiply beyond int64.
// Each dim may be valid while no tensor could have the shape (TensorFlow
// itself rejects such a placeholder), so inferring it would only move the
// failure to run time.
inline Status CheckNumElements(shape_inference::InferenceContext* c,
                               shape_inference::ShapeHandle shape,
                               const char* what) {
  if (!c->RankKnown(shape)) return OkStatus();
  int64_t elements = 1;
  for (int i = 0; i < c->Rank(shape); ++i) {
    const shape_inference::DimensionHandle dim = c->Dim(shape, i);
    if (c->ValueKnown(dim)) {
      elements = MultiplyWithoutOverflow(elements, c->Value(dim));
    }
  }
  if (elements < 0) {
    return errors::InvalidArgument(what, " ", c->DebugString(shape),
                                   ": its number of elements overflows int64");
  }
  return OkStatus();
}

// `shape` as a PartialTensorShape, for rules written once for the shape
// functions and the kernels (a TensorShape converts to one).
inline Status PartialShape(shape_inference::InferenceContext* c,
                           shape_inference::ShapeHandle shape,
                           PartialTensorShape* out) {
  if (!c->RankKnown(shape)) {
    *out = PartialTensorShape();
    return OkStatus();
  }
  std::vector<int64_t> dims(c->Rank(shape));
  for (int i = 0; i < c->Rank(shape); ++i) dims[i] = c->Value(c->Dim(shape, i));
  return PartialTensorShape::BuildPartialTensorShape(dims, out);
}

// The shape of `dims`, unknown where a dim is -1 (kUnknownDim).
inline shape_inference::ShapeHandle MakeShape(
    shape_inference::InferenceContext* c, absl::Span<const int64_t> dims) {
  std::vector<shape_inference::DimensionHandle> handles;
  for (int64_t dim : dims) handles.push_back(c->MakeDim(dim));
  return c->MakeShape(handles);
}

}  // namespace shape_util
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_OPS_SHAPE_UTIL_H_
