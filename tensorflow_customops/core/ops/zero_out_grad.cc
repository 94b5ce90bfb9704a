// C++ gradient of CustomOps>ZeroOut, used through SymbolicGradient. Python
// autodiff uses the gradient registered in python/ops/zero_out_ops.py.

#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/node_def_util.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

// zeroed = x[i] for i < keep and 0 elsewhere, so d(loss)/dx is dy for
// i < keep and 0 elsewhere: ZeroOut applied to dy with the same keep.
Status ZeroOutGrad(const AttrSlice& attrs, FunctionDef* g) {
  // SymbolicGradient nodes written before keep existed name no keep attr;
  // they mean the default.
  int64_t keep = 1;
  if (attrs.Find("keep") != nullptr) {
    TF_RETURN_IF_ERROR(GetNodeAttr(attrs, "keep", &keep));
  }
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
          {{"dx"}, "CustomOps>ZeroOut", {"dy"}, {{"T", "$T"}, {"keep", keep}}},
      });
  // clang-format on
  return OkStatus();
}
REGISTER_OP_GRADIENT("CustomOps>ZeroOut", ZeroOutGrad);

}  // namespace tensorflow
