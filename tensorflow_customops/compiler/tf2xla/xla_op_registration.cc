#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

#include <string>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/kernel_def.pb.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_def.pb.h"

namespace tensorflow {
namespace customops {
namespace {

struct Recorded {
  std::string op_name;
  OpKernel* (*factory)(OpKernelConstruction*);
};

std::vector<Recorded>& RecordedKernels() {
  static auto* kernels = new std::vector<Recorded>;
  return *kernels;
}

// A kernel of `op` for compilation device `device`, with each type attr
// limited to the types the op allows (XLA's own registration also intersects
// with the backend's types; every type the ops allow is one XLA supports).
KernelDef* MakeKernelDef(const OpDef& op, const std::string& device) {
  auto* kernel = new KernelDef;
  kernel->set_op(op.name());
  kernel->set_device_type(device);
  for (const OpDef::AttrDef& attr : op.attr()) {
    if ((attr.type() != "type" && attr.type() != "list(type)") ||
        !attr.has_allowed_values()) {
      continue;
    }
    KernelDef::AttrConstraint* constraint = kernel->add_constraint();
    constraint->set_name(attr.name());
    *constraint->mutable_allowed_values() = attr.allowed_values();
  }
  return kernel;
}

}  // namespace

LateXlaKernel::LateXlaKernel(const char* op_name,
                             OpKernel* (*factory)(OpKernelConstruction*)) {
  RecordedKernels().push_back({op_name, factory});
}

}  // namespace customops
}  // namespace tensorflow

// Registers every recorded lowering as a kernel of each XLA compilation
// device, once per process; returns the number of kernels registered.
extern "C" __attribute__((visibility("default"))) int
TfcoRegisterLateXlaKernels() {
  using tensorflow::customops::RecordedKernels;
  static const int registered = [] {
    int count = 0;
    for (const std::string& device :
         tensorflow::XlaOpRegistry::BackendNames()) {
      for (const auto& recorded : RecordedKernels()) {
        const tensorflow::OpDef* op = nullptr;
        if (!tensorflow::OpRegistry::Global()
                 ->LookUpOpDef(recorded.op_name, &op)
                 .ok()) {
          continue;
        }
        // The registrar takes ownership of the KernelDef.
        tensorflow::kernel_factory::OpKernelRegistrar registrar(
            tensorflow::customops::MakeKernelDef(*op, device), "XlaJitOp",
            recorded.factory);
        ++count;
      }
    }
    return count;
  }();
  return registered;
}
