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

}  // namespace

// cudaStreamAddCallback rather than cudaLaunchHostFunc: it runs after a
// device error too (with the error), so that the op still finishes.
void WhenStreamDone(const GPUDevice& d, const TfcoThreadPool& pool,
                    TfcoDoneFn fn, void* arg) {
  StreamCallback* callback = new StreamCallback{pool, fn, arg};
  const cudaError_t status =
      cudaStreamAddCallback(StreamOf(d), OnStreamDone, callback, 0);
  if (status != cudaSuccess) {
    delete callback;
    CheckCuda(status, "cudaStreamAddCallback");
  }
}

}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
