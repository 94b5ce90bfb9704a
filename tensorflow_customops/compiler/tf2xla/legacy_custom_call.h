// Legacy custom calls into the portable kernels, for TensorFlow 2.12 to 2.19,
// whose XLA has no typed FFI but exports the legacy registry
// (xla::CustomCallTargetRegistry) in every release.
//
// A legacy call on the host is
//   void(void* out, const void** in, const char* opaque, size_t opaque_len,
//        XlaCustomCallStatus* status)
// (API_VERSION_STATUS_RETURNING_UNIFIED): raw pointers, so the lowering also
// describes the buffers in the opaque string (DescribeBuffers), and
// CallFrame gives them back as stand-ins of FFI's types (this namespace,
// which custom_call.h calls `ffi` on these releases): the typed-FFI
// handlers' functions serve both routes unchanged.
//
// - Threads: a legacy call gets no thread pool. It runs on TensorFlow's
//   intra-op pool, which every TensorFlow CPU device, the XLA compilation
//   device included, shares; KeepPool records it when a lowering is built.
// - Errors fail the status, which XLA raises as an InternalError "CustomCall
//   failed: <the kernels' message>". TensorFlow exports no function to fail
//   it (XlaCustomCallStatusSetFailure), so Finish writes the struct that
//   XLA's custom_call_status_internal.h defines (a message means failure),
//   unchanged from 2.12 to 2.19.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_LEGACY_CUSTOM_CALL_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_LEGACY_CUSTOM_CALL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"

#if __has_include("xla/service/custom_call_status.h")
#include "xla/service/custom_call_status.h"
#else
#include "tensorflow/compiler/xla/service/custom_call_status.h"
#endif

namespace Eigen {
class ThreadPoolInterface;
}  // namespace Eigen

namespace tensorflow {
namespace customops {

class FfiAttributes;

namespace legacy {

// FFI's element types are XLA's primitive types.
using DataType = ::xla::PrimitiveType;
constexpr DataType F32 = ::xla::F32;
constexpr DataType F64 = ::xla::F64;
constexpr DataType S32 = ::xla::S32;
constexpr DataType S64 = ::xla::S64;

template <typename T>
using Span = absl::Span<T>;

// A legacy call's status carries a message only: the code is not kept.
enum class ErrorCode : int { kInvalidArgument = 3, kInternal = 13 };

class Error {
 public:
  Error() = default;
  Error(ErrorCode, std::string message) : message_(std::move(message)) {}
  static Error Success() { return Error(); }
  static Error Internal(std::string message) {
    return Error(ErrorCode::kInternal, std::move(message));
  }
  static Error InvalidArgument(std::string message) {
    return Error(ErrorCode::kInvalidArgument, std::move(message));
  }
  bool success() const { return !message_.has_value(); }
  bool failure() const { return message_.has_value(); }
  const std::string& message() const { return *message_; }

 private:
  std::optional<std::string> message_;
};

// A row-major buffer of the call.
class AnyBuffer {
 public:
  AnyBuffer(void* data, DataType type, Span<const int64_t> dims)
      : data_(data), type_(type), dims_(dims) {}
  void* untyped_data() const { return data_; }
  DataType element_type() const { return type_; }
  Span<const int64_t> dimensions() const { return dims_; }
  size_t element_count() const;
  size_t size_bytes() const;

 private:
  void* data_;
  DataType type_;
  Span<const int64_t> dims_;
};

template <DataType T>
struct NativeType;
template <>
struct NativeType<::xla::F32> {
  using type = float;
};
template <>
struct NativeType<::xla::F64> {
  using type = double;
};
template <>
struct NativeType<::xla::S32> {
  using type = int32_t;
};
template <>
struct NativeType<::xla::S64> {
  using type = int64_t;
};

// A buffer whose type the lowering fixed (FFI checks it; here the lowering
// that wrote the call is the check).
template <DataType T, int rank = -1>
class Buffer : public AnyBuffer {
 public:
  explicit Buffer(const AnyBuffer& buffer) : AnyBuffer(buffer) {}
  typename NativeType<T>::type* typed_data() const {
    return static_cast<typename NativeType<T>::type*>(untyped_data());
  }
};
template <DataType T>
using BufferR0 = Buffer<T, 0>;

template <typename T>
class Result {
 public:
  explicit Result(T value) : value_(std::move(value)) {}
  T& operator*() { return value_; }
  T* operator->() { return &value_; }

 private:
  T value_;
};

// TensorFlow's intra-op pool (KeepPool), with TensorFlow's intra-op
// parallelism as its thread count.
class ThreadPool {
 public:
  ThreadPool(Eigen::ThreadPoolInterface* pool, int num_threads)
      : pool_(pool), num_threads_(num_threads) {}
  int64_t num_threads() const { return num_threads_; }
  // Runs `task` on the pool, or on the caller where no pool was kept.
  void Schedule(std::function<void()> task) const;

 private:
  Eigen::ThreadPoolInterface* pool_;
  int num_threads_;
};

// Records the intra-op pool of the device `context` compiles for, which the
// calls it emits run on.
void KeepPool(OpKernelConstruction* context);

// The call's opaque string: `attributes` and the shapes of the call's
// operands and results.
std::string DescribeBuffers(const FfiAttributes& attributes,
                            Span<const xla::Shape> operands,
                            Span<const xla::Shape> results);

// One call's operands, results and attributes. `ok()` is false, with
// `error()`, where the opaque string is not what DescribeBuffers wrote for
// `num_args` operands, `num_rets` results (or kAny) and the attributes
// `required`.
class CallFrame {
 public:
  static constexpr size_t kAny = static_cast<size_t>(-1);
  CallFrame(void* out, const void** in, const char* opaque, size_t opaque_len,
            size_t num_args, size_t num_rets,
            std::initializer_list<const char*> required);
  bool ok() const { return error_.success(); }
  const Error& error() const { return error_; }
  size_t num_args() const { return args_.size(); }

  AnyBuffer Arg(size_t i) const;
  AnyBuffer Ret(size_t i) const;
  Span<const int64_t> Ints(const char* name) const;
  float Float(const char* name) const;
  std::string String(const char* name) const;
  ThreadPool pool() const;

 private:
  struct Described {
    DataType type;
    std::vector<int64_t> dims;
  };
  struct Value {
    std::vector<int64_t> ints;  // an array, an integer or a bool
    double number = 0;          // a float
    std::string text;           // a string
  };
  bool Describe(const char* name, size_t count, std::vector<Described>* out);

  void* out_;
  const void** in_;
  std::map<std::string, Value> attributes_;
  std::vector<Described> args_;
  std::vector<Described> rets_;
  Error error_;
};

// Ends a call: fails `status` with `error`'s message, if any.
void Finish(XlaCustomCallStatus* status, const Error& error);

using Handler = void (*)(void* out, const void** in, const char* opaque,
                         size_t opaque_len, XlaCustomCallStatus* status);
bool RegisterCpuHandler(const char* name, Handler handler);

// Registers `handler` as the host's custom-call target `name`.
#define TFCO_REGISTER_CPU_LEGACY_HANDLER(name, handler) \
  static const bool handler##_registered =              \
      ::tensorflow::customops::legacy::RegisterCpuHandler(name, handler)

}  // namespace legacy
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_LEGACY_CUSTOM_CALL_H_
