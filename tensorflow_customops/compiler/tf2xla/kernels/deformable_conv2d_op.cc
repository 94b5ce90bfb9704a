// XLA lowering of CustomOps>DeformableConv2d: y = alpha * x in the accumulation
// type of the regular kernels (DeformableConv2dAccumulator), so it gives their
// bits.

#include <cmath>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

class DeformableConv2dOp : public XlaOpKernel {
 public:
  explicit DeformableConv2dOp(OpKernelConstruction* context)
      : XlaOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("alpha", &alpha_));
    OP_REQUIRES(context, std::isfinite(alpha_),
                errors::InvalidArgument("alpha must be finite, got ", alpha_));
  }

  void Compile(XlaOpKernelContext* context) override {
    const xla::PrimitiveType type = context->input_xla_type(0);
    const xla::PrimitiveType acc = type == xla::F64 ? xla::F64 : xla::F32;
    const xla::XlaOp y =
        xla::Mul(xla::ConstantR0WithType(context->builder(), acc, alpha_),
                 xla::ConvertElementType(context->Input(0), acc));
    context->SetOutput(0, xla::ConvertElementType(y, type));
  }

 private:
  float alpha_;
};

TFCO_REGISTER_XLA_OP("CustomOps>DeformableConv2d", DeformableConv2dOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
