// C++ gradient of CustomOps>CheckCondition, used through SymbolicGradient
// and, in TF2, through tfco.cpp_gradient. Python autodiff uses the gradient
// registered in python/ops/check_condition_ops.py.

#include "tensorflow/core/framework/function.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

// The op is the identity on the values it lets through: their gradients pass
// through (unchecked: the check guards the forward values). The condition is
// bool, its gradient false.
Status CheckConditionGrad(const AttrSlice& attrs, FunctionDef* g) {
  // Create, not Define: the return value is a whole list output.
  *g = FDH::Create(
      "CheckConditionGradFn",
      // Arg defs
      {"condition: bool", "values: T", "dchecked: T"},
      // Ret val defs
      {"dcondition: bool", "dvalues: T"},
      // Attr defs
      {"T: list({bool, int8, uint8, int16, uint16, int32, uint32, int64, "
       "uint64, half, bfloat16, float, double, complex64, complex128}) >= 1"},
      // Nodes
      {{{"zero"}, "ZerosLike", {"condition"}, {{"T", DT_BOOL}}},
       {{"pass"}, "IdentityN", {"dchecked"}, {{"T", "$T"}}}},
      // Return values
      {{"dcondition", "zero:y:0"}, {"dvalues", "pass:output"}});
  return OkStatus();
}
REGISTER_OP_GRADIENT("CustomOps>CheckCondition", CheckConditionGrad);

}  // namespace tensorflow
