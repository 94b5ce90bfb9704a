// C++ gradient of CustomOps>DeformableConv2d, used through SymbolicGradient
// and, in TF2, through tfco.cpp_gradient. Python autodiff uses the gradient
// registered in python/ops/deform_conv2d_ops.py.

#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

namespace {

// The gradient op computes all four gradients from the forward's inputs.
Status DeformableConv2dGradFn(const AttrSlice& attrs, FunctionDef* g) {
  // clang-format off
  *g = FDH::Define(
      // Arg defs
      {"input: T", "filter: T", "offset: T", "mask: T", "grad_output: T"},
      // Ret val defs
      {"grad_input: T", "grad_filter: T", "grad_offset: T", "grad_mask: T"},
      // Attr defs
      {"T: {half, bfloat16, float, double}", "strides: list(int)",
       "padding: string", "explicit_paddings: list(int)",
       "dilations: list(int)", "offset_groups: int", "data_format: string",
       "use_mask: bool"},
      // Nodes
      {
          {{"grad_input", "grad_filter", "grad_offset", "grad_mask"},
           "CustomOps>DeformableConv2dGrad",
           {"input", "filter", "offset", "mask", "grad_output"},
           {{"T", "$T"}, {"strides", "$strides"}, {"padding", "$padding"},
            {"explicit_paddings", "$explicit_paddings"},
            {"dilations", "$dilations"}, {"offset_groups", "$offset_groups"},
            {"data_format", "$data_format"}, {"use_mask", "$use_mask"}}},
      });
  // clang-format on
  return OkStatus();
}

}  // namespace

REGISTER_OP_GRADIENT("CustomOps>DeformableConv2d", DeformableConv2dGradFn);

}  // namespace tensorflow
