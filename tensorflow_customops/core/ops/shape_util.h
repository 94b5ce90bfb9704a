// Checks shared by the shape functions.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_OPS_SHAPE_UTIL_H_
#define TENSORFLOW_CUSTOMOPS_CORE_OPS_SHAPE_UTIL_H_

#include <cstdint>

#include "tensorflow/core/framework/shape_inference.h"
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

}  // namespace shape_util
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_OPS_SHAPE_UTIL_H_
