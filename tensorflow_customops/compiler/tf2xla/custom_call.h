// Lowerings that call the portable kernels (core/kernels/portable/api.h) from
// XLA: a custom call whose handler runs the regular kernels' functor, on the
// host on TensorFlow's intra-op pool and, with typed FFI and --config=cuda, on
// CUDA on XLA's stream, so compiled code computes what the regular kernels
// compute, at their speed, and raises their errors.
//
// Typed FFI needs XLA's FFI headers and the FFI registry's accessor, which
// TensorFlow 2.20 and newer ship (TFCO_XLA_FFI is 1 there). TensorFlow 2.12
// to 2.19 take legacy custom calls instead (TFCO_XLA_LEGACY_CALLS,
// legacy_custom_call.h), whose handlers are the same functions over that
// file's stand-ins of FFI's types. On devices without a handler the
// lowerings build HLO.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_CUSTOM_CALL_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_CUSTOM_CALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/ffi_handler.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"

#if TFCO_XLA_CUSTOM_CALLS

namespace tensorflow {
namespace customops {

// Whether an op's lowering is a custom call: compiled for a device with
// handlers (the CPU; with typed FFI, the GPU too for ops with
// `gpu_handlers`, where the library has CUDA kernels that can run here:
// TfcoGetGpuSupport), unless the environment
// variable TFCO_XLA_LOWERING=hlo, read when a function is compiled, asks for
// HLO (tests compare the two).
class CustomCallChoice {
 public:
  CustomCallChoice(OpKernelConstruction* context, bool gpu_handlers);
  bool Use() const;
  bool OnGpu() const { return on_gpu_; }

 private:
  bool on_gpu_;
  bool has_handler_;
};

// A custom call's attributes: an MLIR dictionary, its backend config (the
// legacy calls' opaque string, which legacy::CallFrame reads).
class FfiAttributes {
 public:
  FfiAttributes& Int(const char* name, int64_t value);
  FfiAttributes& Float(const char* name, float value);
  FfiAttributes& Bool(const char* name, bool value);
  FfiAttributes& Ints(const char* name, absl::Span<const int64_t> values);
  FfiAttributes& String(const char* name, absl::string_view value);
  std::string str() const;

 private:
  std::vector<std::string> entries_;
};

struct CustomCallResult {
  xla::PrimitiveType type;
  std::vector<int64_t> dims;
  // Dimension 0 has the boxes' dynamic size, where theirs is dynamic.
  bool rows_are_boxes = false;
};

// Emits custom call `target` of `operands` and returns its results, all in
// row-major layout (which the handlers assume). With `boxes` >= 0, the boxes'
// count goes to the handler as a last operand, an S32 scalar: the boxes
// (operand `boxes`) may have a bounded-dynamic first dimension (e.g. from
// tf.boolean_mask), which the call cannot take, so operands are passed padded
// to their bound and the count says how many rows are real. Other dynamic
// dimensions are refused (HasOtherDynamicDimensions). With
// `results_alias_operands`, result i is operand i's buffer. With
// `has_side_effect`, XLA keeps the call even where nothing reads its results
// (a check). A legacy call's attributes also describe its operands and
// results (legacy::CallFrame).
std::vector<xla::XlaOp> EmitCustomCall(
    XlaOpKernelContext* context, const char* target,
    std::vector<xla::XlaOp> operands, int boxes,
    const std::vector<CustomCallResult>& results,
    const FfiAttributes& attributes, bool results_alias_operands = false,
    bool has_side_effect = false);

// Whether some operand has a dynamic dimension besides a first dimension the
// size of the boxes' (operands `rows`): the custom call cannot take it, and
// the HLO lowering does.
bool HasOtherDynamicDimensions(XlaOpKernelContext* context,
                               absl::Span<const xla::XlaOp> operands,
                               absl::Span<const int> rows);

// `status` as an FFI error (same code and message), or success.
ffi::Error FfiError(const Status& status);

}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_CUSTOM_CALL_H_
