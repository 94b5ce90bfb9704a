// GPU kernels of CustomOps>ClipByGlobalNorm and its gradient. Compiled by nvcc
// under --config=cuda.
//
// Deterministic: each tensor is reduced by a fixed grid into its own slots of
// a partial-sum buffer, and one thread adds the slots in order, so no atomics
// decide the summation order.

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tensorflow_customops/core/kernels/clip_by_global_norm_op.h"
#include "tensorflow_customops/core/kernels/gpu_launch.cu.h"

namespace tensorflow {

typedef Eigen::GpuDevice GPUDevice;

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerTensor = 32;
constexpr int kSlotsPerTensor = kThreads * kBlocksPerTensor;

// Each thread of the fixed grid sums a strided subset of the tensor into its
// own slot of `squares` (and `dots`, when dy is given).
template <typename T>
__global__ void PartialSumsKernel(const T* __restrict__ x,
                                  const T* __restrict__ dy, int64_t size,
                                  double* __restrict__ squares,
                                  double* __restrict__ dots) {
  const int slot = blockIdx.x * kThreads + threadIdx.x;
  double square_sum = 0;
  double dot_sum = 0;
  for (int64_t j = slot; j < size; j += kSlotsPerTensor) {
    const double v = static_cast<double>(x[j]);
    square_sum += v * v;
    if (dy != nullptr) dot_sum += v * static_cast<double>(dy[j]);
  }
  squares[slot] = square_sum;
  if (dots != nullptr) dots[slot] = dot_sum;
}

// One thread: adds the slots in order and computes the forward factor.
template <typename T>
__global__ void ForwardFactorKernel(const double* __restrict__ squares,
                                    int64_t num_slots, T clip_norm,
                                    T* __restrict__ global_norm,
                                    T* __restrict__ scale) {
  double sum = 0;
  for (int64_t s = 0; s < num_slots; ++s) sum += squares[s];
  const T norm = static_cast<T>(sqrt(sum));
  *global_norm = norm;
  *scale = functor::ClipScale(norm, clip_norm);
}

template <typename T>
// x and y may be the same buffer (the output reuses the input), so neither is
// __restrict__.
__global__ void ScaleKernel(const T* x, int64_t size,
                            const T* __restrict__ scale, T* y) {
  const T factor = *scale;
  for (int64_t j : GpuGridRangeX<int64_t>(size)) {
    y[j] = x[j] * factor;
  }
}

// One thread: adds the slots in order and computes the gradient coefficients.
template <typename T>
__global__ void GradFactorKernel(const double* __restrict__ squares,
                                 const double* __restrict__ dots,
                                 int64_t num_slots, T clip_norm,
                                 const T* __restrict__ dglobal_norm,
                                 functor::ClipGradCoefficients* coef,
                                 T* __restrict__ dclip_norm) {
  double square_sum = 0;
  double dot_sum = 0;
  for (int64_t s = 0; s < num_slots; ++s) {
    square_sum += squares[s];
    dot_sum += dots[s];
  }
  *coef = functor::ClipGrad(square_sum, dot_sum, static_cast<double>(clip_norm),
                            static_cast<double>(*dglobal_norm));
  *dclip_norm = static_cast<T>(coef->dclip_norm);
}

template <typename T>
// dy and dx may be the same buffer, so neither is __restrict__.
__global__ void GradKernel(const T* __restrict__ x, const T* dy, int64_t size,
                           const functor::ClipGradCoefficients* coef, T* dx) {
  const double scale = coef->scale;
  const double x_coef = coef->x_coef;
  for (int64_t j : GpuGridRangeX<int64_t>(size)) {
    dx[j] = static_cast<T>(scale * static_cast<double>(dy[j]) +
                           x_coef * static_cast<double>(x[j]));
  }
}

// Allocates `count` zeroed doubles of device scratch memory.
bool AllocateSlots(OpKernelContext* context, int64_t count, Tensor* slots) {
  const GPUDevice& d = context->eigen_device<GPUDevice>();
  const absl::Status status =
      context->allocate_temp(DT_DOUBLE, TensorShape({count}), slots);
  if (!status.ok()) {
    context->SetStatus(status);
    return false;
  }
  d.memset(slots->flat<double>().data(), 0, count * sizeof(double));
  return true;
}

template <typename Kernel, typename... Args>
void Launch(const GPUDevice& d, int64_t size, Kernel kernel, Args... args) {
  const GpuLaunchConfig config = GetGpuLaunchConfig64(size, d);
  TF_CHECK_OK(GpuLaunchKernel(kernel, config.block_count,
                              config.thread_per_block, 0, d.stream(), args...));
}

}  // namespace

namespace functor {

template <typename T>
struct ClipByGlobalNorm<GPUDevice, T> {
  void operator()(OpKernelContext* context, const ConstFlatList<T>& t,
                  T clip_norm, const FlatList<T>& clipped,
                  typename TTypes<T>::Scalar global_norm) {
    const GPUDevice& d = context->eigen_device<GPUDevice>();
    const int64_t n = t.size();
    Tensor squares;
    if (!AllocateSlots(context, n * kSlotsPerTensor, &squares)) return;
    Tensor scale;
    OP_REQUIRES_OK(context, context->allocate_temp(DataTypeToEnum<T>::value,
                                                   TensorShape({}), &scale));
    double* slots = squares.flat<double>().data();
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      TF_CHECK_OK(GpuLaunchKernel(
          PartialSumsKernel<T>, kBlocksPerTensor, kThreads, 0, d.stream(),
          t[i].data(), static_cast<const T*>(nullptr), t[i].size(),
          slots + i * kSlotsPerTensor, static_cast<double*>(nullptr)));
    }
    TF_CHECK_OK(GpuLaunchKernel(ForwardFactorKernel<T>, 1, 1, 0, d.stream(),
                                slots, n * kSlotsPerTensor, clip_norm,
                                global_norm.data(), scale.flat<T>().data()));
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      Launch(d, t[i].size(), ScaleKernel<T>, t[i].data(), t[i].size(),
             static_cast<const T*>(scale.flat<T>().data()), clipped[i].data());
    }
  }
};

template <typename T>
struct ClipByGlobalNormGrad<GPUDevice, T> {
  void operator()(OpKernelContext* context, const ConstFlatList<T>& t,
                  T clip_norm, const ConstFlatList<T>& dclipped,
                  typename TTypes<T>::ConstScalar dglobal_norm,
                  const FlatList<T>& dt,
                  typename TTypes<T>::Scalar dclip_norm) {
    const GPUDevice& d = context->eigen_device<GPUDevice>();
    const int64_t n = t.size();
    Tensor slots;
    if (!AllocateSlots(context, 2 * n * kSlotsPerTensor, &slots)) return;
    double* squares = slots.flat<double>().data();
    double* dots = squares + n * kSlotsPerTensor;
    Tensor coef_storage;
    OP_REQUIRES_OK(context,
                   context->allocate_temp(
                       DT_INT8, TensorShape({sizeof(ClipGradCoefficients)}),
                       &coef_storage));
    auto* coef = reinterpret_cast<ClipGradCoefficients*>(
        coef_storage.flat<int8>().data());
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      TF_CHECK_OK(GpuLaunchKernel(
          PartialSumsKernel<T>, kBlocksPerTensor, kThreads, 0, d.stream(),
          t[i].data(), dclipped[i].data(), t[i].size(),
          squares + i * kSlotsPerTensor, dots + i * kSlotsPerTensor));
    }
    TF_CHECK_OK(GpuLaunchKernel(GradFactorKernel<T>, 1, 1, 0, d.stream(),
                                static_cast<const double*>(squares),
                                static_cast<const double*>(dots),
                                n * kSlotsPerTensor, clip_norm,
                                dglobal_norm.data(), coef, dclip_norm.data()));
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      Launch(d, t[i].size(), GradKernel<T>, t[i].data(), dclipped[i].data(),
             t[i].size(), static_cast<const ClipGradCoefficients*>(coef),
             dt[i].data());
    }
  }
};

#define DEFINE_GPU_SPEC(T)                        \
  template struct ClipByGlobalNorm<GPUDevice, T>; \
  template struct ClipByGlobalNormGrad<GPUDevice, T>;
TF_CALL_half(DEFINE_GPU_SPEC);
TF_CALL_bfloat16(DEFINE_GPU_SPEC);
TF_CALL_float(DEFINE_GPU_SPEC);
TF_CALL_double(DEFINE_GPU_SPEC);
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
