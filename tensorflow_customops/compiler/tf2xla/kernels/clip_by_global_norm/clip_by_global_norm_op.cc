// XLA lowerings of CustomOps>ClipByGlobalNorm and its gradient. As in the
// regular kernels, the sums of squares and the dot product are taken in
// double, the forward's clip factor in the tensors' type and the gradient's
// coefficients in double (ClipScale and ClipGrad there); only the order of the
// additions differs.

#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

Status CheckScalar(const TensorShape& shape, const char* op, const char* name) {
  if (TensorShapeUtils::IsScalar(shape)) return OkStatus();
  return errors::InvalidArgument(
      op, ": ", name, " must be a scalar, got shape ", shape.DebugString());
}

// The sum over all elements of all of `x` of product(x[i]), in double.
template <typename Product>
xla::XlaOp DoubleSum(xla::XlaBuilder* b, int n, Product product) {
  const xla::XlaComputation add = xla::CreateScalarAddComputation(xla::F64, b);
  xla::XlaOp sum = xla::ConstantR0<double>(b, 0);
  for (int i = 0; i < n; ++i) {
    sum = xla::Add(
        sum, xla::ReduceAll(product(i), xla::ConstantR0<double>(b, 0), add));
  }
  return sum;
}

xla::XlaOp ToDouble(xla::XlaOp x) {
  return xla::ConvertElementType(x, xla::F64);
}

class ClipByGlobalNormOp : public XlaOpKernel {
 public:
  explicit ClipByGlobalNormOp(OpKernelConstruction* context)
      : XlaOpKernel(context) {}

  void Compile(XlaOpKernelContext* context) override {
    std::vector<xla::XlaOp> t;
    std::vector<TensorShape> shapes;
    OP_REQUIRES_OK(context, context->InputList("t", &t, &shapes));
    const int n = t.size();
    OP_REQUIRES(context, n >= 1,
                errors::InvalidArgument("ClipByGlobalNorm: t must hold at "
                                        "least one tensor"));
    OP_REQUIRES_OK(context, CheckScalar(context->InputShape(n),
                                        "ClipByGlobalNorm", "clip_norm"));
    xla::XlaBuilder* b = context->builder();
    const xla::PrimitiveType type = context->input_xla_type(0);
    const xla::XlaOp sumsq = DoubleSum(b, n, [&](int i) {
      const xla::XlaOp v = ToDouble(t[i]);
      return xla::Mul(v, v);
    });
    const xla::XlaOp norm = xla::ConvertElementType(xla::Sqrt(sumsq), type);
    const xla::XlaOp clip = context->Input(n);
    // clip * min(1 / norm, 1 / clip) with a NaN-propagating minimum, plus
    // (norm - norm): NaN for an inf or NaN norm.
    const xla::XlaOp one = xla::One(b, type);
    const xla::XlaOp inv_norm = xla::Div(one, norm);
    const xla::XlaOp inv_clip = xla::Div(one, clip);
    const xla::XlaOp smaller = xla::Select(
        xla::Or(xla::Ne(inv_norm, inv_norm), xla::Lt(inv_norm, inv_clip)),
        inv_norm, inv_clip);
    const xla::XlaOp scale =
        xla::Add(xla::Mul(clip, smaller), xla::Sub(norm, norm));
    for (int i = 0; i < n; ++i) context->SetOutput(i, xla::Mul(t[i], scale));
    context->SetOutput(n, norm);
  }
};

class ClipByGlobalNormGradOp : public XlaOpKernel {
 public:
  explicit ClipByGlobalNormGradOp(OpKernelConstruction* context)
      : XlaOpKernel(context) {}

  void Compile(XlaOpKernelContext* context) override {
    std::vector<xla::XlaOp> t, dclipped;
    std::vector<TensorShape> t_shapes, dclipped_shapes;
    OP_REQUIRES_OK(context, context->InputList("t", &t, &t_shapes));
    OP_REQUIRES_OK(context,
                   context->InputList("dclipped", &dclipped, &dclipped_shapes));
    const int n = t.size();
    OP_REQUIRES(context, n >= 1,
                errors::InvalidArgument("ClipByGlobalNormGrad: t must hold at "
                                        "least one tensor"));
    OP_REQUIRES_OK(context, CheckScalar(context->InputShape(n),
                                        "ClipByGlobalNormGrad", "clip_norm"));
    OP_REQUIRES_OK(context,
                   CheckScalar(context->InputShape(2 * n + 1),
                               "ClipByGlobalNormGrad", "dglobal_norm"));
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES(context, dclipped_shapes[i] == t_shapes[i],
                  errors::InvalidArgument(
                      "ClipByGlobalNormGrad: dclipped[", i, "] has shape ",
                      dclipped_shapes[i].DebugString(), " but t[", i,
                      "] has shape ", t_shapes[i].DebugString()));
    }
    xla::XlaBuilder* b = context->builder();
    const xla::PrimitiveType type = context->input_xla_type(0);
    const xla::XlaOp sumsq = DoubleSum(b, n, [&](int i) {
      const xla::XlaOp v = ToDouble(t[i]);
      return xla::Mul(v, v);
    });
    const xla::XlaOp dot = DoubleSum(b, n, [&](int i) {
      return xla::Mul(ToDouble(t[i]), ToDouble(dclipped[i]));
    });
    const xla::XlaOp clip = ToDouble(context->Input(n));
    const xla::XlaOp dglobal_norm = ToDouble(context->Input(2 * n + 1));
    const auto f64 = [b](double v) { return xla::ConstantR0<double>(b, v); };
    const xla::XlaOp norm = xla::Sqrt(sumsq);
    const xla::XlaOp nan_unless_finite = xla::Sub(norm, norm);
    const xla::XlaOp clipping =
        xla::Lt(xla::Div(f64(1), norm), xla::Div(f64(1), clip));
    const xla::XlaOp scale =
        xla::Select(clipping, xla::Div(clip, norm), f64(1));
    const xla::XlaOp dscale_dnorm = xla::Select(
        clipping, xla::Div(xla::Neg(clip), xla::Mul(norm, norm)), f64(0));
    const xla::XlaOp dscale_dclip =
        xla::Select(clipping, xla::Div(f64(1), norm), f64(0));
    const xla::XlaOp dnorm =
        xla::Add(xla::Mul(dot, dscale_dnorm), dglobal_norm);
    const xla::XlaOp a = xla::Add(scale, nan_unless_finite);
    const xla::XlaOp x_coef = xla::Add(
        xla::Select(xla::Gt(norm, f64(0)), xla::Div(dnorm, norm), f64(0)),
        nan_unless_finite);
    const xla::XlaOp dclip =
        xla::Add(xla::Mul(dot, dscale_dclip), nan_unless_finite);
    for (int i = 0; i < n; ++i) {
      const xla::XlaOp dt = xla::Add(xla::Mul(a, ToDouble(dclipped[i])),
                                     xla::Mul(x_coef, ToDouble(t[i])));
      context->SetOutput(i, xla::ConvertElementType(dt, type));
    }
    context->SetOutput(n, xla::ConvertElementType(dclip, type));
  }
};

TFCO_REGISTER_XLA_OP("CustomOps>ClipByGlobalNorm", ClipByGlobalNormOp);
TFCO_REGISTER_XLA_OP("CustomOps>ClipByGlobalNormGrad", ClipByGlobalNormGradOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
