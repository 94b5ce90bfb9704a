// CustomOps>DeformableConv2d and its gradient op under XLA: compilation fails
// with the reason. The HLO lowering (four gathers of the bilinear corners and
// a DotGeneral forward; scatter-adds and reductions backward) is not written
// yet, and there is no silent fallback.

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

class DeformableConv2dXlaOp : public XlaOpKernel {
 public:
  explicit DeformableConv2dXlaOp(OpKernelConstruction* context)
      : XlaOpKernel(context) {}

  void Compile(XlaOpKernelContext* context) override {
    context->SetStatus(errors::Unimplemented(
        context->op_kernel().type_string().substr(sizeof("CustomOps>") - 1),
        " has no XLA lowering yet: call tfco.deform_conv2d outside the "
        "jit_compile function"));
  }
};

TFCO_REGISTER_XLA_OP("CustomOps>DeformableConv2d", DeformableConv2dXlaOp);
TFCO_REGISTER_XLA_OP("CustomOps>DeformableConv2dGrad", DeformableConv2dXlaOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
