// Device helpers shared by the RoI GPU kernels (*_gpu.cu.cc only).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_OPS_GPU_CU_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_OPS_GPU_CU_H_

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tensorflow_customops/core/kernels/roi_ops_common.h"

namespace tensorflow {
namespace roi {

// Logical (k, ph, pw, c) of an element of a pooled tensor.
struct PooledIndex {
  int64_t k;
  int ph;
  int pw;
  int64_t c;
};

// Decodes linear index i of a pooled tensor laid out as `pooled` (NHWC when
// its channel stride is 1, else NCHW), so consecutive threads write
// consecutive elements.
__device__ inline PooledIndex DecodePooled(int64_t i, const RoiShape& s,
                                           const Layout& pooled) {
  PooledIndex idx;
  if (pooled.c_stride == 1) {
    idx.c = i % s.out_channels;
    i /= s.out_channels;
    idx.pw = static_cast<int>(i % s.pooled_width);
    i /= s.pooled_width;
    idx.ph = static_cast<int>(i % s.pooled_height);
    idx.k = i / s.pooled_height;
  } else {
    idx.pw = static_cast<int>(i % s.pooled_width);
    i /= s.pooled_width;
    idx.ph = static_cast<int>(i % s.pooled_height);
    i /= s.pooled_height;
    idx.c = i % s.out_channels;
    idx.k = i / s.out_channels;
  }
  return idx;
}

// The rois were validated on the host; copy them next to the kernel. The
// stream is synchronised so that the host buffer may be released afterwards.
inline void UploadRois(const Eigen::GpuDevice& d, const RoiShape& s,
                       const float* rois, float* device_rois) {
  d.memcpyHostToDevice(device_rois, rois, s.num_rois * 5 * sizeof(float));
  d.synchronize();
}

inline int64_t PooledSize(const RoiShape& s) {
  return s.num_rois * s.pooled_height * s.pooled_width * s.out_channels;
}

}  // namespace roi
}  // namespace tensorflow

#endif  // GOOGLE_CUDA

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_OPS_GPU_CU_H_
