// C++ gradient of CustomOps>ZeroOut, used through SymbolicGradient. Python
// autodiff uses the gradient registered in python/ops/zero_out_ops.py.

#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

// zeroed = x[0] at index 0 and 0 elsewhere, so d(loss)/dx is dy at index 0
// and 0 elsewhere: ZeroOut applied to dy.
absl::Status ZeroOutGrad(const AttrSlice& attrs, FunctionDef* g) {
  // clang-format off
  *g = FDH::Define(
      // Arg defs
      {"x: T", "dy: T"},
      // Ret val defs
      {"dx: T"},
      // Attr defs
      {"T: {float, double, half, bfloat16}"},
      // Nodes
      {
          {{"dx"}, "CustomOps>ZeroOut", {"dy"}, {{"T", "$T"}}},
      });
  // clang-format on
  return absl::OkStatus();
}
REGISTER_OP_GRADIENT("CustomOps>ZeroOut", ZeroOutGrad);

}  // namespace tensorflow
