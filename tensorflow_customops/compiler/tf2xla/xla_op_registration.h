// Registration of the library's XLA lowerings, in either load order.
//
// XLA turns the lowerings registered with REGISTER_XLA_OP into kernels of its
// compilation devices (XLA_CPU_JIT, XLA_GPU_JIT) once per process, at the
// first compilation. A library loaded after that, which is the case when
// Python compiled a jit_compile function before importing
// tensorflow_customops, would leave its ops without XLA kernels.
// TFCO_REGISTER_XLA_OP therefore also records each lowering, and
// TfcoRegisterLateXlaKernels() registers the recorded ones as kernels of every
// compilation device; the loader calls it only when XLA's own registration
// has already run (doing both registers every kernel twice).

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_XLA_OP_REGISTRATION_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_XLA_OP_REGISTRATION_H_

#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tensorflow {
namespace customops {

// Records the lowering `factory` of op `op_name` for late registration.
class LateXlaKernel {
 public:
  LateXlaKernel(const char* op_name,
                OpKernel* (*factory)(OpKernelConstruction*));
};

}  // namespace customops
}  // namespace tensorflow

// Registers XlaOpKernel subclass OP as the lowering of op NAME (a string
// literal). Further arguments continue the XlaOpRegistrationBuilder, e.g.
// .CompileTimeConstantInput("features_shape").
#define TFCO_REGISTER_XLA_OP(NAME, OP, ...) \
  TFCO_REGISTER_XLA_OP_UNIQ(__COUNTER__, NAME, OP, __VA_ARGS__)
#define TFCO_REGISTER_XLA_OP_UNIQ(COUNTER, NAME, OP, ...) \
  TFCO_REGISTER_XLA_OP_UNIQ2(COUNTER, NAME, OP, __VA_ARGS__)
#define TFCO_REGISTER_XLA_OP_UNIQ2(COUNTER, NAME, OP, ...) \
  REGISTER_XLA_OP(Name(NAME) __VA_ARGS__, OP);             \
  static ::tensorflow::customops::LateXlaKernel            \
      tfco_late_xla_kernel_##COUNTER(                      \
          NAME,                                            \
          [](::tensorflow::OpKernelConstruction* context)  \
              -> ::tensorflow::OpKernel* { return new OP(context); })

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_XLA_OP_REGISTRATION_H_
