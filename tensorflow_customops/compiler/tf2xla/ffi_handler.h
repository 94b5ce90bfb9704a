// What the custom calls' handlers need (custom_call.h has the lowerings'
// side): the FFI types, the portable kernels' devices, dtypes and errors in
// FFI's terms, and the handlers' registration. With typed FFI it includes no
// TensorFlow header, so that tools/gpu_check can link the GPU handlers as
// they are, register them with a registry of its own (TfcoFfiApi) and call
// them as XLA does, on a machine without TensorFlow.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_FFI_HANDLER_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_FFI_HANDLER_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

// Only 2.20 and newer ship the FFI headers.
#if __has_include("xla/ffi/api/ffi.h")
#define TFCO_XLA_FFI 1
#include <utility>

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

// `binding` followed by `kArgs` buffer operands, then `kRets` buffer
// results. Bindings are moved only by their own Arg and Ret (their move
// constructor is private), so each step hands the next a temporary.
template <int kArgs, int kRets, typename Binding>
auto WithBuffers(Binding&& binding) {
  static_assert(kArgs + kRets > 0, "no buffers to add");
  if constexpr (kArgs == 0 && kRets == 1) {
    return std::move(binding).template Ret<ffi::AnyBuffer>();
  } else if constexpr (kArgs == 0) {
    return WithBuffers<0, kRets - 1>(
        std::move(binding).template Ret<ffi::AnyBuffer>());
  } else if constexpr (kArgs == 1 && kRets == 0) {
    return std::move(binding).template Arg<ffi::AnyBuffer>();
  } else {
    return WithBuffers<kArgs - 1, kRets>(
        std::move(binding).template Arg<ffi::AnyBuffer>());
  }
}

// The FFI registry the handlers register with: the process's, which XLA in
// TensorFlow reads (custom_call.cc), or tools/gpu_check's.
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

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_FFI_HANDLER_H_
