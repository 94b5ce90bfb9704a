// C++ gradient of CustomOps>MatrixMul, used through SymbolicGradient. Python
// autodiff uses the gradient registered in python/ops/matrix_mul_ops.py.

#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/node_def_util.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

namespace {

// One gradient product: `out = op(x) * op(y)` as a MatrixMul node.
FDH::Node Product(const std::string& out, const std::string& x, bool tx,
                  const std::string& y, bool ty) {
  return {{out},
          "CustomOps>MatrixMul",
          {x, y},
          {{"T", "$T"}, {"transpose_a", tx}, {"transpose_b", ty}}};
}

}  // namespace

// With C = op(A) op(B) and upstream dC, dop(A) = dC op(B)^T and
// dop(B) = op(A)^T dC. Undoing the transposes of op gives, per case:
//   C = A B:     dA = dC B^T       dB = A^T dC
//   C = A B^T:   dA = dC B         dB = dC^T A
//   C = A^T B:   dA = B dC^T       dB = A dC
//   C = A^T B^T: dA = B^T dC^T     dB = dC^T A^T
Status MatrixMulGrad(const AttrSlice& attrs, FunctionDef* g) {
  bool ta;
  bool tb;
  TF_RETURN_IF_ERROR(GetNodeAttr(attrs, "transpose_a", &ta));
  TF_RETURN_IF_ERROR(GetNodeAttr(attrs, "transpose_b", &tb));
  FDH::Node da;
  FDH::Node db;
  if (!ta && !tb) {
    da = Product("da", "dc", false, "b", true);
    db = Product("db", "a", true, "dc", false);
  } else if (!ta && tb) {
    da = Product("da", "dc", false, "b", false);
    db = Product("db", "dc", true, "a", false);
  } else if (ta && !tb) {
    da = Product("da", "b", false, "dc", true);
    db = Product("db", "a", false, "dc", false);
  } else {
    da = Product("da", "b", true, "dc", true);
    db = Product("db", "dc", true, "a", true);
  }
  *g = FDH::Define(
      // Arg defs
      {"a: T", "b: T", "dc: T"},
      // Ret val defs
      {"da: T", "db: T"},
      // Attr defs
      {"T: {half, bfloat16, float, double}"},
      // Nodes
      {da, db});
  return OkStatus();
}
REGISTER_OP_GRADIENT("CustomOps>MatrixMul", MatrixMulGrad);

}  // namespace tensorflow
