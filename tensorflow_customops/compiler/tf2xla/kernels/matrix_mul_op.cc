// XLA lowering of CustomOps>MatrixMul: one dot, contracting the dimensions the
// transpose attrs select. Half and bfloat16 accumulate in float, as the
// regular kernels do.

#include "tensorflow/compiler/tf2xla/type_util.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/util/overflow.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"
#include "xla/hlo/builder/xla_builder.h"

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
    const TensorShape a = context->InputShape(0);
    const TensorShape b = context->InputShape(1);
    OP_REQUIRES(context, a.dims() == 2,
                errors::InvalidArgument("MatrixMul: a must be a matrix, got ",
                                        "shape ", a.DebugString()));
    OP_REQUIRES(context, b.dims() == 2,
                errors::InvalidArgument("MatrixMul: b must be a matrix, got ",
                                        "shape ", b.DebugString()));
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0);
    const int64_t inner_a = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t inner_b = b.dim_size(transpose_b_ ? 1 : 0);
    const int64_t n = b.dim_size(transpose_b_ ? 0 : 1);
    OP_REQUIRES(
        context, inner_a == inner_b,
        errors::InvalidArgument(
            "MatrixMul: inner dimensions differ: a ", a.DebugString(),
            (transpose_a_ ? " (transposed)" : ""), " contributes ", inner_a,
            ", b ", b.DebugString(), (transpose_b_ ? " (transposed)" : ""),
            " contributes ", inner_b));
    OP_REQUIRES(
        context, MultiplyWithoutOverflow(m, n) >= 0,
        errors::InvalidArgument("MatrixMul: the product [", m, ", ", n,
                                "]: its number of elements overflows int64"));
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
