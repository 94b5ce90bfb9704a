// Launch and device helpers of the core's GPU kernels, built on the CUDA
// runtime alone (no TensorFlow: see portable/api.h). Element counts are 64-bit,
// so tensors of 2^31 or more elements are not truncated, and failures are
// recorded as the call's error (portable/device.h), never a process abort.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_

#if GOOGLE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#define EIGEN_USE_GPU

#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {

// Threads per block of LaunchGpuLoop; kernels may name it in
// __launch_bounds__.
constexpr int kGpuLoopThreads = 256;

inline cudaStream_t StreamOf(const GPUDevice& d) {
  return static_cast<cudaStream_t>(d.raw_stream());
}

// Records `status`, unless it is cudaSuccess, as the call's error.
inline void CheckCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    RecordError(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

// Launches kernel<<<blocks, threads, 0, stream>>>(args...). Every
// configuration these helpers compute is valid, so a rejected launch is a
// driver too old for the kernels, no device, or a broken build: the op fails
// with CUDA's message.
template <typename... Params, typename... Args>
void LaunchGpuKernel(void (*kernel)(Params...), dim3 blocks, dim3 threads,
                     const GPUDevice& d, Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "wrong number of kernel arguments");
  // cudaLaunchKernel reads each argument through a pointer to a value of
  // exactly the parameter's type. Its typed overload, which the CPU
  // emulation (tools/gpu_check/emulation) needs to call the kernel.
  std::tuple<std::decay_t<Params>...> values(args...);
  const cudaError_t status = std::apply(
      [&](auto&... value) {
        void* pointers[] = {static_cast<void*>(&value)...};
        return cudaLaunchKernel(kernel, blocks, threads, pointers, 0,
                                StreamOf(d));
      },
      values);
  CheckCuda(status, "GPU kernel launch");
}

// Launches a kernel whose grid-stride loop, `for (int64_t i :
// GpuGridRangeX<int64_t>(size))`, covers `size` elements: blocks of 256
// threads, which every kernel can launch (even at 255 registers per thread),
// as many as the multiprocessors hold at once for this kernel, fewer for
// small sizes (at least one, so an empty loop is still a valid launch).
template <typename... Params, typename... Args>
void LaunchGpuLoop(void (*kernel)(Params...), int64_t size, const GPUDevice& d,
                   Args... args) {
  constexpr int kThreads = kGpuLoopThreads;
  int blocks_per_multiprocessor = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks_per_multiprocessor, kernel, kThreads, 0) != cudaSuccess) {
    blocks_per_multiprocessor = 1;
  }
  const int64_t resident = static_cast<int64_t>(d.getNumGpuMultiProcessors()) *
                           std::max(1, blocks_per_multiprocessor);
  const int64_t needed = (size + kThreads - 1) / kThreads;
  const int64_t blocks = std::max<int64_t>(1, std::min(needed, resident));
  LaunchGpuKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                  d, args...);
}

// The indices i = start, start + stride, ... below `count` of the calling
// thread in a one-dimensional grid-stride loop:
//   for (int64_t i : GpuGridRangeX<int64_t>(size)) ...
template <typename I>
class GpuGridRangeX {
 public:
  struct Iterator {
    I i;
    I stride;
    __device__ I operator*() const { return i; }
    __device__ Iterator& operator++() {
      i += stride;
      return *this;
    }
    __device__ bool operator!=(const Iterator& end) const { return i < end.i; }
  };
  __device__ explicit GpuGridRangeX(I count)
      : start_(static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) +
               static_cast<I>(threadIdx.x)),
        stride_(static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x)),
        count_(count) {}
  __device__ Iterator begin() const { return Iterator{start_, stride_}; }
  __device__ Iterator end() const { return Iterator{count_, stride_}; }

 private:
  I start_;
  I stride_;
  I count_;
};

// *address += value, atomically. half and bfloat16 add in float and round
// once, through a compare-and-swap of the 32-bit word that holds them (no
// native 16-bit atomic exists on every architecture built for). The CPU
// emulation's atomicAdd takes them as they are: its race check would see the
// loop's first, plain read of the word as a race with other threads' swaps.
__device__ inline void GpuAtomicAdd(float* address, float value) {
  atomicAdd(address, value);
}
__device__ inline void GpuAtomicAdd(double* address, double value) {
  atomicAdd(address, value);
}
#if TFCO_CUDA_EMULATION
template <typename T>
__device__ inline void GpuAtomicAdd(T* address, T value) {
  atomicAdd(address, value);
}
#else
template <typename T>
__device__ inline void GpuAtomicAdd16(T* address, T value) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  unsigned int* word = reinterpret_cast<unsigned int*>(at & ~uintptr_t{3});
  const int shift = (at & 2) ? 16 : 0;
  unsigned int old = *word;
  unsigned int assumed;
  do {
    assumed = old;
    const T current = Eigen::numext::bit_cast<T>(
        static_cast<uint16_t>((assumed >> shift) & 0xffffu));
    const T sum =
        static_cast<T>(static_cast<float>(current) + static_cast<float>(value));
    const unsigned int bits = Eigen::numext::bit_cast<uint16_t>(sum);
    old = atomicCAS(word, assumed,
                    (assumed & ~(0xffffu << shift)) | (bits << shift));
  } while (old != assumed);
}
__device__ inline void GpuAtomicAdd(Eigen::half* address, Eigen::half value) {
  GpuAtomicAdd16(address, value);
}
__device__ inline void GpuAtomicAdd(Eigen::bfloat16* address,
                                    Eigen::bfloat16 value) {
  GpuAtomicAdd16(address, value);
}
#endif  // TFCO_CUDA_EMULATION

}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_
