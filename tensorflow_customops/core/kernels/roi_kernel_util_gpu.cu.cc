// The device side of roi_kernel_util: the one copy of a call's validated rois
// to the GPU.

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow_customops/core/kernels/roi_kernel_util.h"

namespace tensorflow {
namespace customops {
namespace roi {

void CopyToDevice(const Eigen::GpuDevice& d, const float* host, int64_t count,
                  float* device) {
  d.memcpyHostToDevice(device, host, count * sizeof(float));
  d.synchronize();
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
