// Why function-level target attributes, and why they are safe here: the
// library is built for baseline x86-64, and compiling a whole file with
// -mavx512f would also compile every inline function and template it uses
// (Eigen, std::) with AVX-512; the linker keeps one copy of each, so other
// files could end up calling AVX-512 code on CPUs without it. Only the two
// micro-kernels below carry target(...) attributes, they live in an anonymous
// namespace (internal linkage, no symbol another file can bind to) and call
// nothing but the always-inline intrinsics of <immintrin.h>. Everything else
// in this file is baseline code.

#include "tensorflow_customops/core/kernels/matrix_mul_cpu_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>  // NOLINT(build/c++11)
#include <utility>

namespace tensorflow {
namespace matrix_mul_cpu {
namespace {

// The inner dimension is summed in blocks of kKc, a constant shared by both
// ISAs so that results do not depend on which one runs.
constexpr int64_t kKc = 256;
// Tile bounds. Within a tile, each Mr-row strip of A (Mr x kKc) stays in L1
// while it meets every column panel of the tile's B block (kKc x
// kMaxTileCols, 256 KB), which stays in L2 with the tile's rows of C.
constexpr int64_t kMaxTileRows = 192;
constexpr int64_t kMaxTileCols = 256;
constexpr int64_t kSerialPackFloats = int64_t{1} << 18;

// Micro-kernels for an Mr x Nr block: c[i, j] = (accumulate ? c[i, j] : 0) +
// the sum over p < kc of a[p * Mr + i] * b[p * Nr + j], accumulated from zero
// in p order with fused multiply-adds. a and b are packed (see PackA, PackB).
// The AVX-512 block is 6 rows by 4 vectors: per step of p it loads 4 vectors
// of b and broadcasts 6 values of a for 24 multiply-adds. Measured against 12
// rows by 2 vectors (14 loads per 24 multiply-adds), it was 3 to 5% faster.
constexpr int kAvx512Mr = 6;
constexpr int kAvx512Vectors = 4;
constexpr int kAvx512Nr = 16 * kAvx512Vectors;

__attribute__((target("avx512f"))) void KernelAvx512(int64_t kc, const float* a,
                                                     const float* b, float* c,
                                                     int64_t ldc,
                                                     bool accumulate) {
  __m512 acc[kAvx512Mr][kAvx512Vectors];
#pragma GCC unroll 6
  for (int i = 0; i < kAvx512Mr; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kAvx512Vectors; ++v) {
      // c is read or written only at the end; start fetching it now.
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v),
                   _MM_HINT_T0);
      acc[i][v] = _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[kAvx512Vectors];
#pragma GCC unroll 4
    for (int v = 0; v < kAvx512Vectors; ++v)
      bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 6
    for (int i = 0; i < kAvx512Mr; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < kAvx512Vectors; ++v) {
        acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
      }
    }
    a += kAvx512Mr;
    b += kAvx512Nr;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kAvx512Mr; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kAvx512Vectors; ++v) {
      float* out = c + i * ldc + 16 * v;
      if (accumulate)
        acc[i][v] = _mm512_add_ps(_mm512_loadu_ps(out), acc[i][v]);
      _mm512_storeu_ps(out, acc[i][v]);
    }
  }
}

constexpr int kAvx2Mr = 6;
constexpr int kAvx2Nr = 16;

__attribute__((target("avx2,fma"))) void KernelAvx2(int64_t kc, const float* a,
                                                    const float* b, float* c,
                                                    int64_t ldc,
                                                    bool accumulate) {
  __m256 acc[kAvx2Mr][2];
#pragma GCC unroll 6
  for (int i = 0; i < kAvx2Mr; ++i) {
    // c is read or written only at the end; start fetching it now.
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 8), _MM_HINT_T0);
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kAvx2Mr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += kAvx2Mr;
    b += kAvx2Nr;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kAvx2Mr; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm256_add_ps(_mm256_loadu_ps(row), acc[i][0]);
      acc[i][1] = _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[i][1]);
    }
    _mm256_storeu_ps(row, acc[i][0]);
    _mm256_storeu_ps(row + 8, acc[i][1]);
  }
}

using KernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c,
                          int64_t ldc, bool accumulate);

// Packing lays out a strip of op(a) (Mr rows) or op(b) (Nr columns) as k
// groups of W values, one group per step of the inner dimension: the order
// the micro-kernel reads them. Lanes past `width` are zero.

// dst[p * W + i] = src[p * ld + i]: each group is a contiguous run of src.
template <int W>
void PackRuns(const float* src, int64_t ld, int64_t width, int64_t k,
              float* dst) {
  for (int64_t p = 0; p < k; ++p) {
    float* out = dst + p * W;
    if (width == W) {
      std::memcpy(out, src + p * ld, W * sizeof(float));
      continue;
    }
    std::memcpy(out, src + p * ld, width * sizeof(float));
    std::fill(out + width, out + W, 0.0f);
  }
}

// dst[p * W + i] = src[i * ld + p]: a transpose, done in 4 x 4 SSE blocks
// (baseline x86-64) with scalar edges.
template <int W>
void PackTransposed(const float* src, int64_t ld, int64_t width, int64_t k,
                    float* dst) {
  int64_t i = 0;
  for (; i + 4 <= width; i += 4) {
    const float* s = src + i * ld;
    int64_t p = 0;
    for (; p + 4 <= k; p += 4) {
      __m128 r0 = _mm_loadu_ps(s + p);
      __m128 r1 = _mm_loadu_ps(s + ld + p);
      __m128 r2 = _mm_loadu_ps(s + 2 * ld + p);
      __m128 r3 = _mm_loadu_ps(s + 3 * ld + p);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(dst + p * W + i, r0);
      _mm_storeu_ps(dst + (p + 1) * W + i, r1);
      _mm_storeu_ps(dst + (p + 2) * W + i, r2);
      _mm_storeu_ps(dst + (p + 3) * W + i, r3);
    }
    for (; p < k; ++p) {
      for (int64_t q = 0; q < 4; ++q) dst[p * W + i + q] = s[q * ld + p];
    }
  }
  for (; i < width; ++i) {
    for (int64_t p = 0; p < k; ++p) dst[p * W + i] = src[i * ld + p];
  }
  for (; i < W; ++i) {
    for (int64_t p = 0; p < k; ++p) dst[p * W + i] = 0.0f;
  }
}

// Rows [row0, row0 + Mr) of op(a), where a is m x k (k x m if transposed).
template <int Mr>
void PackA(bool transpose_a, int64_t m, int64_t k, const float* a, int64_t row0,
           float* dst) {
  const int64_t rows = std::min<int64_t>(Mr, m - row0);
  if (transpose_a) {
    PackRuns<Mr>(a + row0, m, rows, k, dst);
  } else {
    PackTransposed<Mr>(a + row0 * k, k, rows, k, dst);
  }
}

// Columns [col0, col0 + Nr) of op(b), where b is k x n (n x k if transposed).
template <int Nr>
void PackB(bool transpose_b, int64_t n, int64_t k, const float* b, int64_t col0,
           float* dst) {
  const int64_t cols = std::min<int64_t>(Nr, n - col0);
  if (transpose_b) {
    PackTransposed<Nr>(b + col0 * k, k, cols, k, dst);
  } else {
    PackRuns<Nr>(b + col0, n, cols, k, dst);
  }
}

int64_t CeilDiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

template <int Mr, int Nr>
void GemmImpl(KernelFn kernel, bool transpose_a, bool transpose_b, int64_t m,
              int64_t n, int64_t k, const float* a, const float* b, float* c,
              float* workspace, int num_threads,
              const ParallelFor& parallel_for) {
  const int64_t row_panels = CeilDiv(m, Mr);
  const int64_t col_panels = CeilDiv(n, Nr);
  float* packed_a = workspace;
  float* packed_b = workspace + row_panels * Mr * k;

  const auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      if (u < row_panels) {
        PackA<Mr>(transpose_a, m, k, a, u * Mr, packed_a + u * Mr * k);
      } else {
        const int64_t j = u - row_panels;
        PackB<Nr>(transpose_b, n, k, b, j * Nr, packed_b + j * Nr * k);
      }
    }
  };
  // Small operands are packed on this thread: waking the pool twice per
  // product costs more than the copy.
  if ((row_panels * Mr + col_panels * Nr) * k <= kSerialPackFloats) {
    pack(0, row_panels + col_panels);
  } else {
    parallel_for(row_panels + col_panels, 2.0 * k * std::max(Mr, Nr), pack);
  }

  // Tiles of whole panels; smaller ones where there would be too few to keep
  // every thread busy. Which thread computes a tile never changes its bits.
  int64_t tile_rows = std::min(row_panels, kMaxTileRows / Mr);
  int64_t tile_cols = std::min(col_panels, kMaxTileCols / Nr);
  while (CeilDiv(row_panels, tile_rows) * CeilDiv(col_panels, tile_cols) <
             4 * num_threads &&
         (tile_rows > 1 || tile_cols > 1)) {
    if (tile_rows * Mr >= tile_cols * Nr && tile_rows > 1) {
      tile_rows = CeilDiv(tile_rows, 2);
    } else if (tile_cols > 1) {
      tile_cols = CeilDiv(tile_cols, 2);
    } else {
      tile_rows = CeilDiv(tile_rows, 2);
    }
  }
  const int64_t tiles_down = CeilDiv(row_panels, tile_rows);
  const int64_t tiles = tiles_down * CeilDiv(col_panels, tile_cols);

  const auto compute_tile = [&](int64_t t, float* edge) {
    const int64_t i0 = (t % tiles_down) * tile_rows;
    const int64_t i1 = std::min(row_panels, i0 + tile_rows);
    const int64_t j0 = (t / tiles_down) * tile_cols;
    const int64_t j1 = std::min(col_panels, j0 + tile_cols);
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kc = std::min(kKc, k - p0);
      const bool accumulate = p0 > 0;
      for (int64_t i = i0; i < i1; ++i) {
        const float* ap = packed_a + i * Mr * k + p0 * Mr;
        const int64_t rows = std::min<int64_t>(Mr, m - i * Mr);
        for (int64_t j = j0; j < j1; ++j) {
          const float* bp = packed_b + j * Nr * k + p0 * Nr;
          const int64_t cols = std::min<int64_t>(Nr, n - j * Nr);
          float* cp = c + i * Mr * n + j * Nr;
          if (rows == Mr && cols == Nr) {
            kernel(kc, ap, bp, cp, n, accumulate);
            continue;
          }
          // Edge tile: the padded product goes to a buffer, then the valid
          // part to c, with the same addition as the kernel's.
          kernel(kc, ap, bp, edge, Nr, false);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t s = 0; s < cols; ++s) {
              cp[r * n + s] = accumulate ? cp[r * n + s] + edge[r * Nr + s]
                                         : edge[r * Nr + s];
            }
          }
        }
      }
    }
  };
  // One task per thread, each taking tiles until none are left: on a busy
  // machine a thread that starts late finds the work done instead of holding
  // a fixed share of it.
  std::atomic<int64_t> next_tile{0};
  parallel_for(std::min<int64_t>(num_threads, tiles),
               2.0 * m * n * k / 32 / num_threads,
               [&](int64_t begin, int64_t end) {
                 alignas(64) float edge[Mr * Nr];
                 for (int64_t t = next_tile++; t < tiles; t = next_tile++) {
                   compute_tile(t, edge);
                 }
               });
}

// The slot Workspace returns buffers to. Never destroyed, so that a buffer
// released during static destruction still finds it.
struct CachedBuffer {
  std::mutex mu;
  float* data = nullptr;
  int64_t capacity = 0;
};

CachedBuffer& Cache() {
  static CachedBuffer* cache = new CachedBuffer;
  return *cache;
}

constexpr int64_t kMaxCachedFloats = int64_t{1} << 26;  // 256 MB

Isa DetectIsa() {
  __builtin_cpu_init();
  Isa best = Isa::kBaseline;
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (__builtin_cpu_supports("avx512f")) {
    best = Isa::kAvx512;
  } else if (avx2) {
    best = Isa::kAvx2;
  }
  const char* requested = std::getenv("TFCO_MATMUL_ISA");
  if (requested == nullptr) return best;
  if (std::strcmp(requested, "baseline") == 0) return Isa::kBaseline;
  if (std::strcmp(requested, "avx2") == 0 && avx2) return Isa::kAvx2;
  return best;
}

}  // namespace

Workspace::Workspace(int64_t floats) {
  // Sizes whose byte count would overflow get no buffer, like failed ones.
  if (floats <= 0 || floats > std::numeric_limits<int64_t>::max() / 8) return;
  CachedBuffer& cache = Cache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    if (cache.data != nullptr && cache.capacity >= floats) {
      std::swap(data_, cache.data);
      std::swap(capacity_, cache.capacity);
      return;
    }
  }
  // aligned_alloc wants a multiple of the alignment.
  const int64_t bytes = (floats * int64_t{sizeof(float)} + 63) / 64 * 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  capacity_ = data_ == nullptr ? 0 : floats;
}

Workspace::~Workspace() {
  if (data_ != nullptr && capacity_ <= kMaxCachedFloats) {
    CachedBuffer& cache = Cache();
    std::lock_guard<std::mutex> lock(cache.mu);
    // Keep the larger of the two; free the other.
    if (cache.capacity < capacity_) {
      std::swap(data_, cache.data);
      std::swap(capacity_, cache.capacity);
    }
  }
  std::free(data_);
}

Isa SelectedIsa() {
  static const Isa isa = DetectIsa();
  return isa;
}

int64_t GemmWorkspaceSize(Isa isa, int64_t m, int64_t n, int64_t k) {
  const int64_t mr = isa == Isa::kAvx512 ? kAvx512Mr : kAvx2Mr;
  const int64_t nr = isa == Isa::kAvx512 ? kAvx512Nr : kAvx2Nr;
  return (CeilDiv(m, mr) * mr + CeilDiv(n, nr) * nr) * k;
}

void Gemm(Isa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
          int64_t k, const float* a, const float* b, float* c, float* workspace,
          int num_threads, const ParallelFor& parallel_for) {
  if (isa == Isa::kAvx512) {
    GemmImpl<kAvx512Mr, kAvx512Nr>(KernelAvx512, transpose_a, transpose_b, m, n,
                                   k, a, b, c, workspace, num_threads,
                                   parallel_for);
  } else {
    GemmImpl<kAvx2Mr, kAvx2Nr>(KernelAvx2, transpose_a, transpose_b, m, n, k, a,
                               b, c, workspace, num_threads, parallel_for);
  }
}

}  // namespace matrix_mul_cpu
}  // namespace tensorflow
