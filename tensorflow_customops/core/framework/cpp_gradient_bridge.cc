// The C++ gradient of an op (REGISTER_OP_GRADIENT) as a graph that TF2 can
// run: python/ops/cpp_gradients.py calls these functions through ctypes and
// imports the graph inside a tf.function. SymbolicGradient, the only other
// way to reach these gradients, works in tf.compat.v1 graphs alone.
//
// A plain C interface: ctypes needs no TensorFlow headers, and protos cross
// it serialized.

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/node_def_util.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/platform/status.h"

namespace tensorflow_customops {
namespace {

using ::tensorflow::AttrSlice;
using ::tensorflow::FunctionDef;
using ::tensorflow::GraphDef;
using ::tensorflow::InstantiationResult;
using ::tensorflow::NodeDef;
using ::tensorflow::OkStatus;
using ::tensorflow::OpDef;
using ::tensorflow::OpRegistry;
using ::tensorflow::Status;

char* CopyOut(const std::string& bytes, size_t* size) {
  char* out = static_cast<char*>(std::malloc(bytes.size() + 1));
  std::memcpy(out, bytes.data(), bytes.size());
  out[bytes.size()] = '\0';
  if (size != nullptr) *size = bytes.size();
  return out;
}

Status InstantiateGradient(NodeDef node, GraphDef* graph) {
  const OpDef* op_def = nullptr;
  TF_RETURN_IF_ERROR(OpRegistry::Global()->LookUpOpDef(node.op(), &op_def));
  tensorflow::AddDefaultsToNodeDef(*op_def, &node);
  tensorflow::gradient::Creator creator = nullptr;
  TF_RETURN_IF_ERROR(
      tensorflow::gradient::GetOpGradientCreator(node.op(), &creator));
  if (creator == nullptr) {
    return tensorflow::errors::NotFound(node.op(), " has no C++ gradient");
  }
  const AttrSlice attrs(node);
  FunctionDef gradient;
  TF_RETURN_IF_ERROR(creator(attrs, &gradient));
  // Expands $T placeholders and list(type) / N * T arguments for these
  // attrs, as the function runtime does for SymbolicGradient.
  InstantiationResult result;
  TF_RETURN_IF_ERROR(tensorflow::InstantiateFunction(
      gradient, attrs,
      [](const std::string& op, const OpDef** sig) {
        return OpRegistry::Global()->LookUpOpDef(op, sig);
      },
      &result));
  for (NodeDef& n : result.nodes) *graph->add_node() = std::move(n);
  return OkStatus();
}

}  // namespace
}  // namespace tensorflow_customops

extern "C" {

// Whether op `op_type` has a C++ gradient.
int TfcoHasCppGradient(const char* op_type) {
  tensorflow::gradient::Creator creator = nullptr;
  return tensorflow::gradient::GetOpGradientCreator(op_type, &creator).ok() &&
         creator != nullptr;
}

// The C++ gradient of the node `node_def` (a serialized NodeDef: op and
// attrs; defaults are added) as a serialized GraphDef of _Arg (the node's
// inputs, then one upstream gradient per output), computation and _Retval
// (one gradient per input) nodes. Returns 0 and sets *graph_def and
// *graph_def_size, or returns 1 and sets *error; free both with TfcoFree.
int TfcoCppGradientGraph(const char* node_def, size_t node_def_size,
                         char** graph_def, size_t* graph_def_size,
                         char** error) {
  tensorflow::NodeDef node;
  tensorflow::Status status;
  tensorflow::GraphDef graph;
  if (!node.ParseFromArray(node_def, static_cast<int>(node_def_size))) {
    status = tensorflow::errors::InvalidArgument("node_def is not a NodeDef");
  } else {
    status = tensorflow_customops::InstantiateGradient(node, &graph);
  }
  if (!status.ok()) {
    *error = tensorflow_customops::CopyOut(status.ToString(), nullptr);
    return 1;
  }
  *graph_def =
      tensorflow_customops::CopyOut(graph.SerializeAsString(), graph_def_size);
  return 0;
}

void TfcoFree(void* pointer) { std::free(pointer); }

}  // extern "C"
