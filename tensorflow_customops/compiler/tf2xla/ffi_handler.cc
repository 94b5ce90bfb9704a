#include "tensorflow_customops/compiler/tf2xla/ffi_handler.h"

#if TFCO_XLA_CUSTOM_CALLS

namespace tensorflow {
namespace customops {

FfiCoreDevice::FfiCoreDevice(ffi::ThreadPool pool) : pool_(pool) {
  core_pool_.pool = &pool_;
  core_pool_.num_threads = static_cast<int>(pool_.num_threads());
  core_pool_.pool_threads = core_pool_.num_threads;
  core_pool_.schedule = [](void* pool, void (*fn)(void*), void* arg) {
    static_cast<ffi::ThreadPool*>(pool)->Schedule([fn, arg] { fn(arg); });
  };
  // FFI does not say which of its threads the caller is.
  core_pool_.current_thread_id = [](void*) { return -1; };
  device_.cpu = &core_pool_;
  device_.gpu_stream = nullptr;
}

bool CoreDtypeOf(ffi::DataType type, TfcoDtype* dtype) {
  switch (type) {
    case ffi::DataType::F16:
      *dtype = TFCO_HALF;
      return true;
    case ffi::DataType::BF16:
      *dtype = TFCO_BFLOAT16;
      return true;
    case ffi::DataType::F32:
      *dtype = TFCO_FLOAT;
      return true;
    case ffi::DataType::F64:
      *dtype = TFCO_DOUBLE;
      return true;
    case ffi::DataType::S8:
      *dtype = TFCO_INT8;
      return true;
    case ffi::DataType::U8:
      *dtype = TFCO_UINT8;
      return true;
    case ffi::DataType::S32:
      *dtype = TFCO_INT32;
      return true;
    case ffi::DataType::S64:
      *dtype = TFCO_INT64;
      return true;
    default:
      return false;
  }
}

ffi::Error FfiCoreError(TfcoError error) {
  if (error == nullptr) return ffi::Error::Success();
  return ffi::Error::Internal(error);
}

}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS
