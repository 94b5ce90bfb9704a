// GPU kernels of CustomOps>ClipByGlobalNorm and its gradient. Compiled by nvcc
// under --config=cuda.
//
// Deterministic: each tensor is reduced by a fixed grid into its own slots of
// a partial-sum buffer, and one thread adds the slots in order, so no atomics
// decide the summation order.

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow_customops/core/kernels/clip_by_global_norm/clip_by_global_norm_op.h"
#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

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

// Scratch layout: the partial sums (n slots of kSlotsPerTensor doubles for
// the squares, and as many for the dot products in the gradient), then the
// factor the second pass reads.
int64_t SlotCount(int64_t num_tensors, int sums) {
  return sums * num_tensors * kSlotsPerTensor;
}

// Zeroes the slots: those of empty tensors are never written, yet summed.
double* ZeroedSlots(const GPUDevice& d, void* scratch, int64_t count) {
  ZeroGpuMemory(d, scratch, count * sizeof(double));
  return static_cast<double*>(scratch);
}

}  // namespace

namespace functor {

template <typename T>
struct ClipByGlobalNorm<GPUDevice, T> {
  static int64_t ScratchBytes(int64_t num_tensors) {
    return SlotCount(num_tensors, 1) * sizeof(double) + sizeof(T);
  }

  void operator()(const GPUDevice& d, const ConstFlatList<T>& t, T clip_norm,
                  const FlatList<T>& clipped,
                  typename TTypes<T>::Scalar global_norm, void* scratch) {
    const int64_t n = t.size();
    const int64_t count = SlotCount(n, 1);
    double* slots = ZeroedSlots(d, scratch, count);
    T* scale = reinterpret_cast<T*>(slots + count);
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      LaunchGpuKernel(
          PartialSumsKernel<T>, dim3(kBlocksPerTensor), dim3(kThreads), d,
          t[i].data(), static_cast<const T*>(nullptr), t[i].size(),
          slots + i * kSlotsPerTensor, static_cast<double*>(nullptr));
    }
    LaunchGpuKernel(ForwardFactorKernel<T>, dim3(1), dim3(1), d,
                    static_cast<const double*>(slots), count, clip_norm,
                    global_norm.data(), scale);
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      LaunchGpuLoop(ScaleKernel<T>, t[i].size(), d, t[i].data(), t[i].size(),
                    static_cast<const T*>(scale), clipped[i].data());
    }
  }
};

template <typename T>
struct ClipByGlobalNormGrad<GPUDevice, T> {
  static int64_t ScratchBytes(int64_t num_tensors) {
    return SlotCount(num_tensors, 2) * sizeof(double) +
           sizeof(ClipGradCoefficients);
  }

  void operator()(const GPUDevice& d, const ConstFlatList<T>& t, T clip_norm,
                  const ConstFlatList<T>& dclipped,
                  typename TTypes<T>::ConstScalar dglobal_norm,
                  const FlatList<T>& dt, typename TTypes<T>::Scalar dclip_norm,
                  void* scratch) {
    const int64_t n = t.size();
    const int64_t count = SlotCount(n, 2);
    double* squares = ZeroedSlots(d, scratch, count);
    double* dots = squares + SlotCount(n, 1);
    auto* coef = reinterpret_cast<ClipGradCoefficients*>(squares + count);
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      LaunchGpuKernel(PartialSumsKernel<T>, dim3(kBlocksPerTensor),
                      dim3(kThreads), d, t[i].data(), dclipped[i].data(),
                      t[i].size(), squares + i * kSlotsPerTensor,
                      dots + i * kSlotsPerTensor);
    }
    LaunchGpuKernel(GradFactorKernel<T>, dim3(1), dim3(1), d,
                    static_cast<const double*>(squares),
                    static_cast<const double*>(dots), SlotCount(n, 1),
                    clip_norm, dglobal_norm.data(), coef, dclip_norm.data());
    for (int64_t i = 0; i < n; ++i) {
      if (t[i].size() == 0) continue;
      LaunchGpuLoop(GradKernel<T>, t[i].size(), d, t[i].data(),
                    dclipped[i].data(), t[i].size(),
                    static_cast<const ClipGradCoefficients*>(coef),
                    dt[i].data());
    }
  }
};

#define DEFINE_GPU_SPEC(T)                        \
  template struct ClipByGlobalNorm<GPUDevice, T>; \
  template struct ClipByGlobalNormGrad<GPUDevice, T>;
TFCO_CALL_FLOAT_TYPES(DEFINE_GPU_SPEC)
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
