// C++ gradient of CustomOps>CheckNumericsN, used through SymbolicGradient.
// Python autodiff uses the gradient registered in
// python/ops/check_numerics_n_ops.py.

#include "tensorflow/core/framework/function.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

// The op is the identity on valid inputs, so the upstream gradients pass
// through unchanged (and unchecked: the check guards the forward values).
Status CheckNumericsNGrad(const AttrSlice& attrs, FunctionDef* g) {
  // Create, not Define: the return value is a whole list output.
  *g = FDH::Create("CheckNumericsNGradFn",
                   // Arg defs
                   {"tensors: T", "dchecked: T"},
                   // Ret val defs
                   {"dtensors: T"},
                   // Attr defs
                   {"T: list({half, bfloat16, float, double}) >= 1"},
                   // Nodes
                   {{{"pass"}, "IdentityN", {"dchecked"}, {{"T", "$T"}}}},
                   // Return values
                   {{"dtensors", "pass:output"}});
  return OkStatus();
}
REGISTER_OP_GRADIENT("CustomOps>CheckNumericsN", CheckNumericsNGrad);

}  // namespace tensorflow
