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
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/core/kernels/portable/api.h"

// Only 2.20 and newer ship the FFI headers.
#if __has_include("xla/ffi/api/ffi.h")
#define TFCO_XLA_FFI 1
#include "xla/ffi/api/ffi.h"
#else
#define TFCO_XLA_FFI 0
#endif

// The legacy registry, and the layout of the status a legacy call fails
// through, on 2.12 to 2.19 (tensorflow/compiler/xla until 2.15).
#if !TFCO_XLA_FFI &&                                               \
    (__has_include("xla/service/custom_call_status_internal.h") || \
     __has_include(                                                \
         "tensorflow/compiler/xla/service/custom_call_status_internal.h"))
#define TFCO_XLA_LEGACY_CALLS 1
#include "tensorflow_customops/compiler/tf2xla/legacy_custom_call.h"
#else
#define TFCO_XLA_LEGACY_CALLS 0
#endif

#define TFCO_XLA_CUSTOM_CALLS (TFCO_XLA_FFI || TFCO_XLA_LEGACY_CALLS)

// Defined (1) where the portable kernels have CUDA kernels (--config=cuda).
#ifndef TFCO_CUDA
#define TFCO_CUDA 0
#endif

#if TFCO_XLA_CUSTOM_CALLS

namespace tensorflow {
namespace customops {

// The handlers' types: XLA's typed FFI, or the legacy calls' stand-ins.
#if TFCO_XLA_FFI
namespace ffi = ::xla::ffi;
#else
namespace ffi = ::tensorflow::customops::legacy;
#endif

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

// TensorFlow's intra-op pool, which XLA gives a handler (which a legacy call
// takes from its compilation), as the portable kernels' device.
class FfiCoreDevice {
 public:
  explicit FfiCoreDevice(ffi::ThreadPool pool);
  FfiCoreDevice(const FfiCoreDevice&) = delete;
  FfiCoreDevice& operator=(const FfiCoreDevice&) = delete;
  const TfcoDevice* get() const { return &device_; }

 private:
  ffi::ThreadPool pool_;
  TfcoThreadPool core_pool_;
  TfcoDevice device_;
};

// The portable kernels' name of an FFI element type; false for the others.
bool CoreDtypeOf(ffi::DataType type, TfcoDtype* dtype);

// `status` as an FFI error (same code and message), or success.
ffi::Error FfiError(const Status& status);
// A failure of the portable kernels as an Internal error.
ffi::Error FfiCoreError(TfcoError error);

}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS

#if TFCO_XLA_FFI

namespace tensorflow {
namespace customops {

// The portable kernels' device of XLA's CUDA stream (a handler's
// PlatformStream).
inline TfcoDevice StreamDevice(void* stream) {
  return TfcoDevice{nullptr, stream};
}

// The process's FFI registry, which XLA in TensorFlow reads.
const XLA_FFI_Api* TfcoFfiApi();

// Registers handler symbol `handler` as custom-call target `name` on the
// host, or on CUDA GPUs; the lowerings emit such calls where
// CustomCallChoice::Use().
#define TFCO_REGISTER_CPU_FFI_HANDLER(name, handler)                    \
  XLA_FFI_REGISTER_HANDLER(::tensorflow::customops::TfcoFfiApi(), name, \
                           "Host", handler)
#define TFCO_REGISTER_GPU_FFI_HANDLER(name, handler)                    \
  XLA_FFI_REGISTER_HANDLER(::tensorflow::customops::TfcoFfiApi(), name, \
                           "CUDA", handler)

}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_FFI

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_CUSTOM_CALL_H_
