// C++ gradient of CustomOps>ClipByGlobalNorm, used through SymbolicGradient.
// Python autodiff uses the gradient registered in
// python/ops/clip_by_global_norm_ops.py; both call the fused gradient op.

#include "tensorflow/core/framework/function.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

Status ClipByGlobalNormGrad(const AttrSlice& attrs, FunctionDef* g) {
  // List outputs need Create: its return map names a whole list output
  // ("grad:dt"), where Define would name a single tensor.
  *g = FDH::Create(
      "ClipByGlobalNormGradFn",
      // Arg defs
      {"t: N * T", "clip_norm: T", "dclipped: N * T", "dglobal_norm: T"},
      // Ret val defs
      {"dt: N * T", "dclip_norm: T"},
      // Attr defs
      {"N: int >= 1", "T: {half, bfloat16, float, double}"},
      // Nodes
      {{{"grad"},
        "CustomOps>ClipByGlobalNormGrad",
        {"t", "clip_norm", "dclipped", "dglobal_norm"},
        {{"N", "$N"}, {"T", "$T"}}}},
      // Return values
      {{"dt", "grad:dt"}, {"dclip_norm", "grad:dclip_norm:0"}});
  return OkStatus();
}
REGISTER_OP_GRADIENT("CustomOps>ClipByGlobalNorm", ClipByGlobalNormGrad);

}  // namespace tensorflow
