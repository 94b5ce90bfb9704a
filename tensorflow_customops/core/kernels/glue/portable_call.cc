#include "tensorflow_customops/core/kernels/glue/portable_call.h"

namespace tensorflow {
namespace customops {

CoreDevice::CoreDevice(OpKernelContext* context, bool on_gpu) {
  const Eigen::ThreadPoolDevice& cpu = context->eigen_cpu_device();
  pool_.pool = cpu.getPool();
  pool_.num_threads = cpu.numThreads();
  pool_.pool_threads = cpu.getPool()->NumThreads();
  pool_.schedule = [](void* pool, void (*fn)(void*), void* arg) {
    static_cast<Eigen::ThreadPoolInterface*>(pool)->Schedule(
        [fn, arg] { fn(arg); });
  };
  pool_.current_thread_id = [](void* pool) {
    return static_cast<Eigen::ThreadPoolInterface*>(pool)->CurrentThreadId();
  };
  device_.cpu = &pool_;
  device_.gpu_stream = nullptr;
#if GOOGLE_CUDA
  if (on_gpu) {
    device_.gpu_stream = context->eigen_gpu_device().stream();
  }
#endif
}

TfcoDtype CoreDtype(DataType dtype) {
  switch (dtype) {
    case DT_HALF:
      return TFCO_HALF;
    case DT_BFLOAT16:
      return TFCO_BFLOAT16;
    case DT_FLOAT:
      return TFCO_FLOAT;
    case DT_DOUBLE:
      return TFCO_DOUBLE;
    case DT_INT8:
      return TFCO_INT8;
    case DT_UINT8:
      return TFCO_UINT8;
    case DT_INT32:
      return TFCO_INT32;
    case DT_INT64:
      return TFCO_INT64;
    default:
      // The core names no other type and answers with an error.
      return static_cast<TfcoDtype>(0);
  }
}

Status CoreStatus(TfcoError error) {
  if (error == nullptr) return OkStatus();
  return errors::Internal(error);
}

}  // namespace customops
}  // namespace tensorflow
