// C++ checks of the CustomOps>ZeroOut spec, shape function and
// FunctionDefHelper gradient, independent of Python. CHECK failures abort,
// which fails the test.

#include <cstdio>
#include <string>
#include <vector>

#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/node_def_builder.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/public/version.h"

namespace tensorflow {
namespace {

constexpr char kOp[] = "CustomOps>ZeroOut";

const OpRegistrationData* LookUp() {
  const OpRegistrationData* reg = nullptr;
  TF_CHECK_OK(OpRegistry::Global()->LookUp(kOp, &reg));
  return reg;
}

void TestSpec() {
  const OpDef& op_def = LookUp()->op_def;
  CHECK_EQ(op_def.input_arg_size(), 1);
  CHECK_EQ(op_def.output_arg_size(), 1);
  const OpDef::AttrDef* t = FindAttr("T", op_def);
  CHECK(t != nullptr);
  // The tutorial op was int32-only; int32 stays the default.
  CHECK_EQ(t->default_value().type(), DT_INT32);
  CHECK_EQ(t->allowed_values().list().type_size(), 8);
  // Added in spec version 3; the default keeps the original behaviour.
  const OpDef::AttrDef* keep = FindAttr("keep", op_def);
  CHECK(keep != nullptr);
  CHECK_EQ(keep->default_value().i(), 1);
}

// Runs the shape function on one input shape and returns the output shape.
std::string InferOutputShape(const PartialTensorShape& input) {
  NodeDef node_def;
  TF_CHECK_OK(NodeDefBuilder("zero_out", kOp)
                  .Input("x", 0, DT_FLOAT)
                  .Finalize(&node_def));
  const OpRegistrationData* reg = LookUp();
  shape_inference::InferenceContext c(TF_GRAPH_DEF_VERSION, AttrSlice(node_def),
                                      reg->op_def, {input}, {}, {}, {});
  TF_CHECK_OK(c.construction_status());
  TF_CHECK_OK(c.Run(reg->shape_inference_fn));
  CHECK_EQ(c.num_outputs(), 1);
  return c.DebugString(c.output(0));
}

void TestShapeFunction() {
  CHECK_EQ(InferOutputShape(PartialTensorShape({2, -1, 3})), "[2,?,3]");
  CHECK_EQ(InferOutputShape(PartialTensorShape({})), "[]");
  CHECK_EQ(InferOutputShape(PartialTensorShape({0, 5})), "[0,5]");
  CHECK_EQ(InferOutputShape(PartialTensorShape()), "?");
}

// `keep` < 0: the attrs name no keep, as SymbolicGradient nodes written
// before it existed; the gradient must then use the default, 1.
void TestGradientFunction(DataType dtype, int64_t keep) {
  gradient::Creator creator = nullptr;
  TF_CHECK_OK(gradient::GetOpGradientCreator(kOp, &creator));
  CHECK(creator != nullptr) << "no REGISTER_OP_GRADIENT for " << kOp;

  AttrValueMap attrs;
  attrs["T"].set_type(dtype);
  if (keep >= 0) attrs["keep"].set_i(keep);
  FunctionDef fdef;
  TF_CHECK_OK(creator(AttrSlice(&attrs), &fdef));

  InstantiationResult result;
  TF_CHECK_OK(InstantiateFunction(
      fdef, AttrSlice(&attrs),
      [](const std::string& op, const OpDef** sig) {
        return OpRegistry::Global()->LookUpOpDef(op, sig);
      },
      &result));
  // Signature (x, dy) -> dx, all of dtype T.
  CHECK_EQ(result.arg_types.size(), 2);
  CHECK_EQ(result.arg_types[0], dtype);
  CHECK_EQ(result.arg_types[1], dtype);
  CHECK_EQ(result.ret_types.size(), 1);
  CHECK_EQ(result.ret_types[0], dtype);
  // The body applies ZeroOut to dy (the function's second argument).
  int zero_out_nodes = 0;
  for (const NodeDef& node : result.nodes) {
    if (node.op() == kOp) {
      ++zero_out_nodes;
      CHECK_EQ(node.input_size(), 1);
      CHECK_EQ(node.input(0), "dy");
      CHECK_EQ(node.attr().at("keep").i(), keep >= 0 ? keep : 1);
    }
  }
  CHECK_EQ(zero_out_nodes, 1);
}

}  // namespace
}  // namespace tensorflow

int main() {
  tensorflow::TestSpec();
  tensorflow::TestShapeFunction();
  for (tensorflow::DataType dtype :
       {tensorflow::DT_HALF, tensorflow::DT_BFLOAT16, tensorflow::DT_FLOAT,
        tensorflow::DT_DOUBLE}) {
    tensorflow::TestGradientFunction(dtype, /*keep=*/-1);
    tensorflow::TestGradientFunction(dtype, /*keep=*/3);
  }
  std::printf("zero_out_ops_test: all checks passed\n");
  return 0;
}
