// CustomOps>CheckNumericsN under XLA: compilation fails with the reason. Its
// contract is an error when a value is NaN or Inf, and a compiled XLA program
// cannot raise one at run time; passing the tensors through unchecked would
// break the contract silently.

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

class CheckNumericsNOp : public XlaOpKernel {
 public:
  explicit CheckNumericsNOp(OpKernelConstruction* context)
      : XlaOpKernel(context) {}

  void Compile(XlaOpKernelContext* context) override {
    context->SetStatus(errors::Unimplemented(
        "CustomOps>CheckNumericsN cannot be compiled with XLA: a compiled "
        "program cannot raise an error on the values it computes, and "
        "passing NaN or Inf through unchecked would break the op's contract. "
        "Call tfco.check_numerics_n outside the jit_compile function."));
  }
};

TFCO_REGISTER_XLA_OP("CustomOps>CheckNumericsN", CheckNumericsNOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
