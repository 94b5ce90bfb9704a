#include "tensorflow_customops/core/kernels/glue/portable_call.h"

#include <memory>
#include <utility>

#include "tensorflow/core/platform/env.h"

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

namespace {

// Set on CUDA's callback thread while it hands a call to the pool.
thread_local bool handing_over = false;

// The pool's `schedule` for TfcoWhenStreamDone. Eigen's pool runs a task
// inline when the queue it picked is full; on CUDA's callback thread that
// would run the op's continuation (which may call CUDA, and TensorFlow's
// executor after `done` does) where CUDA forbids it, so such a task moves
// to a thread of its own.
void ScheduleOffCallbackThread(void* pool, void (*fn)(void*), void* arg) {
  handing_over = true;
  static_cast<Eigen::ThreadPoolInterface*>(pool)->Schedule([fn, arg] {
    if (handing_over) {
      Env::Default()->SchedClosure([fn, arg] { fn(arg); });
    } else {
      fn(arg);
    }
  });
  handing_over = false;
}

}  // namespace

void WhenGpuDone(OpKernelContext* context, std::function<void(Status)> then) {
  auto* pending = new std::function<void(Status)>(std::move(then));
  TfcoThreadPool pool;
  pool.pool = context->eigen_cpu_device().getPool();
  pool.num_threads = 1;
  pool.pool_threads = 1;
  pool.schedule = ScheduleOffCallbackThread;
  pool.current_thread_id = [](void*) { return -1; };
  TfcoDevice device{&pool, nullptr};
#if GOOGLE_CUDA
  device.gpu_stream = context->eigen_gpu_device().stream();
#endif
  const TfcoError error = TfcoWhenStreamDone(
      &device,
      [](void* arg, TfcoError stream_error) {
        std::unique_ptr<std::function<void(Status)>> call(
            static_cast<std::function<void(Status)>*>(arg));
        (*call)(CoreStatus(stream_error));
      },
      pending);
  if (error != nullptr) {
    std::unique_ptr<std::function<void(Status)>> call(pending);
    (*call)(CoreStatus(error));
  }
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
