// GPU kernel of CustomOps>CheckNumericsN. Compiled by nvcc under
// --config=cuda.

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tensorflow_customops/core/kernels/check_numerics_n_op.h"
#include "tensorflow_customops/core/kernels/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

typedef Eigen::GpuDevice GPUDevice;

namespace {

template <typename T>
__global__ void NumericFlagsKernel(const T* __restrict__ x, int64_t size,
                                   int* flags) {
  int local = 0;
  for (int64_t j : GpuGridRangeX<int64_t>(size)) {
    if (Eigen::numext::isnan(x[j])) local |= functor::kFoundNaN;
    if (Eigen::numext::isinf(x[j])) local |= functor::kFoundInf;
  }
  // Atomic OR is order-independent, so the flags are deterministic.
  if (local != 0) atomicOr(flags, local);
}

}  // namespace

namespace functor {

template <typename T>
struct NumericFlags<GPUDevice, T> {
  void operator()(const GPUDevice& d, typename TTypes<T>::ConstFlat x,
                  int* flags) {
    LaunchGpuLoop(NumericFlagsKernel<T>, x.size(), d, x.data(), x.size(),
                  flags);
  }
};

#define DEFINE_GPU_SPEC(T) template struct NumericFlags<GPUDevice, T>;
TF_CALL_half(DEFINE_GPU_SPEC);
TF_CALL_bfloat16(DEFINE_GPU_SPEC);
TF_CALL_float(DEFINE_GPU_SPEC);
TF_CALL_double(DEFINE_GPU_SPEC);
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
