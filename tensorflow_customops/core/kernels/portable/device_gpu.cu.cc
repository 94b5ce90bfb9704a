// The device side of portable/device.h. Compiled by nvcc under --config=cuda.

#if GOOGLE_CUDA

#include <atomic>
#include <string>

#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

namespace {

// Multiprocessor counts by device ordinal, 0 until queried. Threads that
// race query the same value; an atomic, not std::call_once, because
// call_once's pthread_once would raise the glibc floor (tools/glibc_compat.py).
constexpr int kMaxDevices = 64;
std::atomic<int> multiprocessors[kMaxDevices];

}  // namespace

GPUDevice::GPUDevice(void* stream) : stream_(stream) {
  int device = 0;
  cudaError_t status =
      cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &device);
  if (status == cudaSuccess && (device < 0 || device >= kMaxDevices)) {
    status = cudaErrorInvalidDevice;
  }
  if (status != cudaSuccess) {
    RecordError(std::string("CUDA stream's device: ") +
                cudaGetErrorString(status));
    return;
  }
  if (multiprocessors[device].load() == 0) {
    int count = 0;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount,
                               device) == cudaSuccess) {
      multiprocessors[device].store(count);
    }
  }
  if (multiprocessors[device].load() > 0) {
    multiprocessors_ = multiprocessors[device].load();
  }
}

void ZeroGpuMemory(const GPUDevice& d, void* data, size_t bytes) {
  CheckCuda(cudaMemsetAsync(data, 0, bytes, StreamOf(d)), "cudaMemsetAsync");
}

void CopyToHostAsync(const GPUDevice& d, void* host, const void* gpu,
                     size_t bytes) {
  CheckCuda(
      cudaMemcpyAsync(host, gpu, bytes, cudaMemcpyDeviceToHost, StreamOf(d)),
      "cudaMemcpyAsync");
}

namespace {

// A WhenStreamDone call in flight.
struct StreamCallback {
  TfcoThreadPool pool;
  TfcoDoneFn fn;
  void* arg;
  cudaError_t status = cudaSuccess;
};

// On the pool: CUDA may be called here (for the message), and fn may call it.
void RunStreamCallback(void* p) {
  StreamCallback* callback = static_cast<StreamCallback*>(p);
  std::string error;
  if (callback->status != cudaSuccess) {
    error = std::string(
                "the GPU stream failed before the op's results "
                "reached the host: ") +
            cudaGetErrorString(callback->status);
  }
  callback->fn(callback->arg, error.empty() ? nullptr : error.c_str());
  delete callback;
}

// On CUDA's callback thread, which may not call CUDA, and which holds up
// the stream until this returns: it only hands the call to the pool.
void CUDART_CB OnStreamDone(cudaStream_t, cudaError_t status, void* p) {
  StreamCallback* callback = static_cast<StreamCallback*>(p);
  callback->status = status;
  callback->pool.schedule(callback->pool.pool, RunStreamCallback, callback);
}

// Per device, the stream that carries WhenStreamDone's callbacks. A callback
// holds up the stream it is on until CUDA's callback thread has run it
// (tens of microseconds), so it goes on this stream, after an event of the
// op's stream, which runs on.
std::atomic<cudaStream_t> callback_streams[kMaxDevices];

// With `device` current, as stream and event creation need; restores the
// caller's current device, which is TensorFlow's.
template <typename Fn>
cudaError_t OnDevice(int device, Fn fn) {
  int current = 0;
  cudaError_t status = cudaGetDevice(&current);
  if (status == cudaSuccess && current != device)
    status = cudaSetDevice(device);
  if (status != cudaSuccess) return status;
  status = fn();
  if (current != device) cudaSetDevice(current);
  return status;
}

cudaError_t CallbackStream(int device, cudaStream_t* stream) {
  *stream = callback_streams[device].load();
  if (*stream != nullptr) return cudaSuccess;
  cudaStream_t created = nullptr;
  const cudaError_t status =
      cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
  if (status != cudaSuccess) return status;
  cudaStream_t expected = nullptr;
  if (callback_streams[device].compare_exchange_strong(expected, created)) {
    *stream = created;
  } else {  // another thread created one first
    cudaStreamDestroy(created);
    *stream = expected;
  }
  return cudaSuccess;
}

// Everything enqueued on `stream` so far, as a point on the device's
// callback stream (*waiter).
cudaError_t WaitOnCallbackStream(cudaStream_t stream, cudaStream_t* waiter) {
  int device = 0;
  cudaError_t status = cudaStreamGetDevice(stream, &device);
  if (status != cudaSuccess) return status;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  cudaEvent_t passed = nullptr;
  status = OnDevice(device, [&] {
    const cudaError_t found = CallbackStream(device, waiter);
    if (found != cudaSuccess) return found;
    return cudaEventCreateWithFlags(&passed, cudaEventDisableTiming);
  });
  if (status != cudaSuccess) return status;
  status = cudaEventRecord(passed, stream);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(*waiter, passed, 0);
  // CUDA frees the event once the wait has passed it.
  cudaEventDestroy(passed);
  return status;
}

}  // namespace

// cudaStreamAddCallback rather than cudaLaunchHostFunc: it runs after a
// device error too (with the error), so that the op still finishes.
void WhenStreamDone(const GPUDevice& d, const TfcoThreadPool& pool,
                    TfcoDoneFn fn, void* arg) {
  cudaStream_t waiter = nullptr;
  cudaError_t status = WaitOnCallbackStream(StreamOf(d), &waiter);
  if (status != cudaSuccess) {
    CheckCuda(status, "WhenStreamDone's event");
    return;
  }
  StreamCallback* callback = new StreamCallback{pool, fn, arg};
  status = cudaStreamAddCallback(waiter, OnStreamDone, callback, 0);
  if (status != cudaSuccess) {
    delete callback;
    CheckCuda(status, "cudaStreamAddCallback");
  }
}

}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
