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

namespace {

void CopyAndWait(const GPUDevice& d, void* to, const void* from, size_t bytes,
                 cudaMemcpyKind kind) {
  CheckCuda(cudaMemcpyAsync(to, from, bytes, kind, StreamOf(d)),
            "cudaMemcpyAsync");
  CheckCuda(cudaStreamSynchronize(StreamOf(d)), "cudaStreamSynchronize");
}

}  // namespace

void CopyToGpuAndWait(const GPUDevice& d, void* gpu, const void* host,
                      size_t bytes) {
  CopyAndWait(d, gpu, host, bytes, cudaMemcpyHostToDevice);
}

void CopyToHostAndWait(const GPUDevice& d, void* host, const void* gpu,
                       size_t bytes) {
  CopyAndWait(d, host, gpu, bytes, cudaMemcpyDeviceToHost);
}

}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
