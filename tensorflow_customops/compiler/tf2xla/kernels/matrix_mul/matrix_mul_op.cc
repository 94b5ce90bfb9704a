// XLA lowering of CustomOps>MatrixMul: one dot, contracting the dimensions the
// transpose attrs select. Half and bfloat16 accumulate in float, as the
// regular kernels do.

#include "tensorflow/compiler/tf2xla/type_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"
#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_shape.h"

namespace tensorflow {
namespace customops {
namespace {

class MatrixMulOp : public XlaOpKernel {
 public:
  explicit MatrixMulOp(OpKernelConstruction* context) : XlaOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("transpose_a", &transpose_a_));
    OP_REQUIRES_OK(context, context->GetAttr("transpose_b", &transpose_b_));
  }

  void Compile(XlaOpKernelContext* context) override {
    TensorShape product_shape;
    OP_REQUIRES_OK(context, MatrixMulProductShape(
                                context->InputShape(0), context->InputShape(1),
                                transpose_a_, transpose_b_, &product_shape));
    const xla::PrimitiveType type = context->input_xla_type(0);
    const bool narrow = type == xla::F16 || type == xla::BF16;
    xla::DotDimensionNumbers dims;
    dims.add_lhs_contracting_dimensions(transpose_a_ ? 0 : 1);
    dims.add_rhs_contracting_dimensions(transpose_b_ ? 1 : 0);
    xla::XlaOp product =
        xla::DotGeneral(context->Input(0), context->Input(1), dims,
                        /*precision_config=*/nullptr,
                        /*preferred_element_type=*/narrow ? xla::F32 : type);
    if (narrow) product = xla::ConvertElementType(product, type);
    context->SetOutput(0, product);
  }

 private:
  bool transpose_a_;
  bool transpose_b_;
};

TFCO_REGISTER_XLA_OP("CustomOps>MatrixMul", MatrixMulOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
