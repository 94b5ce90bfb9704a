// Launch configuration for the GPU kernels' element loops, which index with
// int64_t: TensorFlow's GPU_1D_KERNEL_LOOP iterates with an int and
// GetGpuLaunchConfig takes an int, so a tensor of 2^31 or more elements would
// have its size truncated (a failed CHECK, or elements silently skipped).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_

#if GOOGLE_CUDA

#include <algorithm>
#include <cstdint>
#include <limits>

#define EIGEN_USE_GPU

#include "tensorflow/core/util/gpu_kernel_helper.h"

namespace tensorflow {

// A launch configuration for `size` elements of a grid-stride loop
// `for (int64_t i : GpuGridRangeX<int64_t>(size))`. The grid is capped at
// what the device runs at once anyway, so capping the count at the largest
// int changes nothing but the truncation.
inline GpuLaunchConfig GetGpuLaunchConfig64(int64_t size,
                                            const Eigen::GpuDevice& d) {
  return GetGpuLaunchConfig(static_cast<int>(std::min<int64_t>(
                                size, std::numeric_limits<int>::max())),
                            d);
}

}  // namespace tensorflow

#endif  // GOOGLE_CUDA

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_LAUNCH_CU_H_
