// The XLA custom calls' CUDA handlers (compiler/tf2xla/ffi_handler.h), called
// as XLA's CUDA executables call them, without XLA or TensorFlow: the
// handlers register, as they do in TensorFlow, with an FFI registry, here
// this program's (TfcoFfiApi, xla_ffi.cc), which implements the few FFI calls
// a handler makes; FfiCall builds the call frame XLA builds (buffers,
// attributes sorted by name, the stream) for the execute stage.
//
// No FFI or CUDA header here: the runners include it under nvcc.

#ifndef TOOLS_GPU_CHECK_XLA_FFI_H_
#define TOOLS_GPU_CHECK_XLA_FFI_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/gpu_check/case_file.h"

namespace gpu_check {

// The custom-call targets that have a handler for CUDA, sorted.
std::vector<std::string> GpuHandlerTargets();

// One call of a target's CUDA handler.
class FfiCall {
 public:
  // Operands and results, in the call's order: row-major device buffers.
  FfiCall& Arg(const void* data, DType dtype, std::vector<int64_t> dims);
  FfiCall& Ret(void* data, DType dtype, std::vector<int64_t> dims);
  // Attributes: an array of i64, or an f32 scalar.
  FfiCall& Ints(const std::string& name, std::vector<int64_t> values);
  FfiCall& Float(const std::string& name, float value);

  // Calls the CUDA handler of `target` on `stream` (a cudaStream_t); throws
  // with the error it returns.
  void Run(const std::string& target, void* stream) const;

 private:
  struct Buffer {
    void* data;
    DType dtype;
    std::vector<int64_t> dims;
  };
  struct Attr {
    std::vector<int64_t> ints;
    float value = 0;
    bool scalar = false;
  };
  std::vector<Buffer> args_;
  std::vector<Buffer> rets_;
  std::map<std::string, Attr> attrs_;  // sorted by name, as XLA passes them
};

}  // namespace gpu_check

#endif  // TOOLS_GPU_CHECK_XLA_FFI_H_
