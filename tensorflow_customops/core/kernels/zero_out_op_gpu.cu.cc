// GPU kernel of CustomOps>ZeroOut. Compiled by nvcc under --config=cuda.

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tensorflow_customops/core/kernels/gpu_launch.cu.h"
#include "tensorflow_customops/core/kernels/zero_out_op.h"

namespace tensorflow {
namespace customops {

typedef Eigen::GpuDevice GPUDevice;

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

#define DEFINE_GPU_SPEC(T) template struct ZeroOut<GPUDevice, T>;
TF_CALL_int64(DEFINE_GPU_SPEC);
TF_CALL_float(DEFINE_GPU_SPEC);
TF_CALL_double(DEFINE_GPU_SPEC);
TF_CALL_half(DEFINE_GPU_SPEC);
TF_CALL_bfloat16(DEFINE_GPU_SPEC);
TF_CALL_int8(DEFINE_GPU_SPEC);
TF_CALL_uint8(DEFINE_GPU_SPEC);
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
