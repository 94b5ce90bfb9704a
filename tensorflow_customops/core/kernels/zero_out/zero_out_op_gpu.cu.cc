// GPU kernel of CustomOps>ZeroOut. Compiled by nvcc under --config=cuda.

#if GOOGLE_CUDA

#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"
#include "tensorflow_customops/core/kernels/zero_out/zero_out_op.h"

namespace tensorflow {
namespace customops {

namespace {

template <typename T>
__global__ void ZeroOutKernel(const int64_t size, const int64_t keep,
                              const T* __restrict__ input,
                              T* __restrict__ output) {
  for (int64_t i : GpuGridRangeX<int64_t>(size)) {
    output[i] = i < keep ? input[i] : T(0);
  }
}

}  // namespace

namespace functor {

template <typename T>
struct ZeroOut<GPUDevice, T> {
  void operator()(const GPUDevice& d, typename TTypes<T>::ConstFlat input,
                  typename TTypes<T>::Flat output, int64_t keep) {
    const int64_t size = output.size();
    LaunchGpuLoop(ZeroOutKernel<T>, size, d, size, keep, input.data(),
                  output.data());
  }
};

template struct ZeroOut<GPUDevice, int64_t>;
template struct ZeroOut<GPUDevice, float>;
template struct ZeroOut<GPUDevice, double>;
template struct ZeroOut<GPUDevice, Eigen::half>;
template struct ZeroOut<GPUDevice, Eigen::bfloat16>;
template struct ZeroOut<GPUDevice, int8_t>;
template struct ZeroOut<GPUDevice, uint8_t>;

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
