// Launch helpers for the GPU kernels, built on CUDA and Eigen's GPU device
// alone. TensorFlow's GetGpuLaunchConfig and GpuLaunchKernel are not used:
// they take an int element count (a tensor of 2^31 or more elements would be
// truncated), and their CHECKs and absl::Status pull in TensorFlow's logging,
// which tools/gpu_check, a program that runs the kernels without TensorFlow,
// cannot link.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_

#if GOOGLE_CUDA

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <type_traits>

#define EIGEN_USE_GPU

#include "unsupported/Eigen/CXX11/Tensor"

namespace tensorflow {
namespace customops {

// Threads per block of LaunchGpuLoop; kernels may name it in
// __launch_bounds__.
constexpr int kGpuLoopThreads = 256;

// Launches kernel<<<blocks, threads, 0, d.stream()>>>(args...). Every
// configuration these helpers compute is valid, so a rejected launch is a
// broken build or device; like TensorFlow's own kernels
// (TF_CHECK_OK(GpuLaunchKernel(...))), the process stops with CUDA's message.
template <typename... Params, typename... Args>
void LaunchGpuKernel(void (*kernel)(Params...), dim3 blocks, dim3 threads,
                     const Eigen::GpuDevice& d, Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "wrong number of kernel arguments");
  // cudaLaunchKernel reads each argument through a pointer to a value of
  // exactly the parameter's type.
  std::tuple<std::decay_t<Params>...> values(args...);
  const cudaError_t status = std::apply(
      [&](auto&... value) {
        void* pointers[] = {static_cast<void*>(&value)...};
        return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), blocks,
                                threads, pointers, 0, d.stream());
      },
      values);
  if (status != cudaSuccess) {
    std::fprintf(stderr, "tensorflow_customops: GPU kernel launch failed: %s\n",
                 cudaGetErrorString(status));
    std::abort();
  }
}

// Launches a kernel whose grid-stride loop, `for (int64_t i :
// GpuGridRangeX<int64_t>(size))`, covers `size` elements: blocks of 256
// threads, which every kernel can launch (even at 255 registers per thread),
// as many as the multiprocessors hold at once for this kernel, fewer for
// small sizes (at least one, so an empty loop is still a valid launch).
template <typename... Params, typename... Args>
void LaunchGpuLoop(void (*kernel)(Params...), int64_t size,
                   const Eigen::GpuDevice& d, Args... args) {
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

}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_
