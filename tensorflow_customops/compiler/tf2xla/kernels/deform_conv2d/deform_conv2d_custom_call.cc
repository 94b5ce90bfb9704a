#include "tensorflow_customops/compiler/tf2xla/kernels/deform_conv2d/deform_conv2d_custom_call.h"

#include "tensorflow_customops/compiler/tf2xla/kernels/deform_conv2d/deform_conv2d_custom_call_handlers.h"

#if TFCO_XLA_CUSTOM_CALLS

#include <vector>

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

DeformConvCustomCall::DeformConvCustomCall(OpKernelConstruction* context)
    : choice_(context, /*gpu_handlers=*/true) {}

bool DeformConvCustomCall::Compile(
    XlaOpKernelContext* context, bool grad, const TfcoDeformConv2dArgs& args,
    const std::array<int64_t, 4>& output_dims) const {
  if (!choice_.Use()) return false;
  std::vector<xla::XlaOp> operands;
  for (int i = 0; i < (grad ? 5 : 4); ++i) {
    operands.push_back(context->Input(i));
  }
  const xla::PrimitiveType type = context->input_xla_type(0);
  std::vector<CustomCallResult> results;
  if (grad) {
    for (int i = 0; i < 4; ++i) {
      const auto dims = context->InputShape(i).dim_sizes();
      results.push_back({type, std::vector<int64_t>(dims.begin(), dims.end())});
    }
  } else {
    results.push_back(
        {type, std::vector<int64_t>(output_dims.begin(), output_dims.end())});
  }
  FfiAttributes attributes;
  attributes.Ints("ints", Ints(args));
  const std::vector<xla::XlaOp> outputs =
      EmitCustomCall(context, grad ? kGrad : kForward, operands,
                     /*boxes=*/-1, results, attributes);
  for (size_t i = 0; i < outputs.size(); ++i) {
    context->SetOutput(i, outputs[i]);
  }
  return true;
}

}  // namespace deform_conv2d
}  // namespace customops
}  // namespace tensorflow

#else  // TFCO_XLA_CUSTOM_CALLS

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

DeformConvCustomCall::DeformConvCustomCall(OpKernelConstruction*) {}

bool DeformConvCustomCall::Compile(XlaOpKernelContext*, bool,
                                   const TfcoDeformConv2dArgs&,
                                   const std::array<int64_t, 4>&) const {
  return false;
}

}  // namespace deform_conv2d
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS
