// GPU kernel of CustomOps>MatrixMul: a tiled shared-memory matrix product.
// Compiled by nvcc under --config=cuda.

#if GOOGLE_CUDA

#include <algorithm>

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_op.h"
#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

namespace {

constexpr int kTile = 16;
// gridDim.y is limited to 65535 blocks, so tall products launch in slices.
constexpr int64_t kMaxRowTilesPerLaunch = 65535;

// half and bfloat16 accumulate in float: summing k terms in 8 mantissa bits
// would lose most of the result.
template <typename T>
struct Accumulator {
  typedef float type;
};
template <>
struct Accumulator<double> {
  typedef double type;
};

// Each block computes one kTile x kTile tile of the product, staging a tile of
// op(a) and a tile of op(b) in shared memory per step along the inner
// dimension, so each input element is read from global memory once per tile
// instead of once per product element.
template <typename T>
__global__ void MatrixMulKernel(const T* __restrict__ a,
                                const T* __restrict__ b, T* __restrict__ out,
                                int64_t m, int64_t k, int64_t n,
                                bool transpose_a, bool transpose_b,
                                int64_t row_offset) {
  typedef typename Accumulator<T>::type Acc;
  __shared__ Acc a_tile[kTile][kTile];
  // One column of padding avoids shared-memory bank conflicts.
  __shared__ Acc b_tile[kTile][kTile + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t row = row_offset + blockIdx.y * int64_t{kTile} + ty;
  const int64_t col = blockIdx.x * int64_t{kTile} + tx;
  Acc sum(0);
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    const int64_t ka = k0 + tx;
    a_tile[ty][tx] =
        (row < m && ka < k)
            ? static_cast<Acc>(transpose_a ? a[ka * m + row] : a[row * k + ka])
            : Acc(0);
    const int64_t kb = k0 + ty;
    b_tile[ty][tx] =
        (kb < k && col < n)
            ? static_cast<Acc>(transpose_b ? b[col * k + kb] : b[kb * n + col])
            : Acc(0);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i) sum += a_tile[ty][i] * b_tile[i][tx];
    __syncthreads();
  }
  if (row < m && col < n) out[row * n + col] = static_cast<T>(sum);
}

}  // namespace

namespace functor {

template <typename T>
struct MatrixMul<GPUDevice, T> {
  void operator()(const GPUDevice& d, typename TTypes<T>::ConstMatrix a,
                  typename TTypes<T>::ConstMatrix b, bool transpose_a,
                  bool transpose_b, typename TTypes<T>::Matrix product) {
    const int64_t m = product.dimension(0);
    const int64_t n = product.dimension(1);
    const int64_t k = transpose_a ? a.dimension(0) : a.dimension(1);
    const int64_t row_tiles = (m + kTile - 1) / kTile;
    const int64_t col_tiles = (n + kTile - 1) / kTile;
    for (int64_t first = 0; first < row_tiles; first += kMaxRowTilesPerLaunch) {
      const dim3 grid(col_tiles,
                      std::min(kMaxRowTilesPerLaunch, row_tiles - first));
      LaunchGpuKernel(MatrixMulKernel<T>, grid, dim3(kTile, kTile), d, a.data(),
                      b.data(), product.data(), m, k, n, transpose_a,
                      transpose_b, first * kTile);
    }
  }
};

#define DEFINE_GPU_SPEC(T) template struct MatrixMul<GPUDevice, T>;
TFCO_CALL_FLOAT_TYPES(DEFINE_GPU_SPEC)
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
