// GPU kernel of CustomOps>CheckNumericsN. Compiled by nvcc under
// --config=cuda.

#if GOOGLE_CUDA

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"
#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

namespace {

template <typename T>
__global__ void NumericFlagsKernel(const T* __restrict__ x, int64_t size,
                                   int* flags) {
  int local = 0;
  for (int64_t j : GpuGridRangeX<int64_t>(size)) {
    if (Eigen::numext::isnan(x[j])) local |= TFCO_FOUND_NAN;
    if (Eigen::numext::isinf(x[j])) local |= TFCO_FOUND_INF;
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

template struct NumericFlags<GPUDevice, Eigen::half>;
template struct NumericFlags<GPUDevice, Eigen::bfloat16>;
template struct NumericFlags<GPUDevice, float>;
template struct NumericFlags<GPUDevice, double>;

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
