// XLA lowering of CustomOps>ZeroOut: a select on the flat element index.

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/static_shapes.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

class ZeroOutOp : public XlaOpKernel {
 public:
  explicit ZeroOutOp(OpKernelConstruction* context) : XlaOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("keep", &keep_));
    OP_REQUIRES(context, keep_ >= 0,
                errors::InvalidArgument("keep must be >= 0, got ", keep_));
  }

  void Compile(XlaOpKernelContext* context) override {
    // The flat index counts the bounds of dynamic dimensions.
    OP_REQUIRES_OK(context, CheckStaticDimensions(context, {0}));
    const TensorShape shape = context->InputShape(0);
    xla::XlaBuilder* b = context->builder();
    const int64_t size = shape.num_elements();
    const xla::XlaOp flat = xla::Reshape(context->Input(0), {size});
    const xla::XlaOp index = xla::Iota(b, xla::S64, size);
    const xla::XlaOp kept =
        xla::Select(xla::Lt(index, xla::ConstantR0<int64_t>(b, keep_)), flat,
                    xla::ZerosLike(flat));
    context->SetOutput(0, xla::Reshape(kept, shape.dim_sizes()));
  }

 private:
  int64_t keep_;
};

TFCO_REGISTER_XLA_OP("CustomOps>ZeroOut", ZeroOutOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
