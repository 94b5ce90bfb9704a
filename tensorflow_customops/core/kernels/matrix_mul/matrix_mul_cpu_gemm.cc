// The drivers of matrix_mul_cpu::Gemm: packing, blocking and the choice of
// path; the per-ISA inner loops are in matrix_mul_cpu_gemm_loops.cc.

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>  // NOLINT(build/c++11)
#include <utility>

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm_loops.h"

namespace tensorflow {
namespace customops {
namespace matrix_mul_cpu {
namespace {

// The inner dimension is summed in blocks of kKc, a constant shared by both
// ISAs and all paths so that results do not depend on which one runs.
constexpr int64_t kKc = kGemmBlockK;
// Tile bounds. Within a tile, each Mr-row strip of A (Mr x kKc) stays in L1
// while it meets every column panel of the tile's B block (kKc x
// kMaxTileCols, 256 KB), which stays in L2 with the tile's rows of C.
constexpr int64_t kMaxTileRows = 192;
constexpr int64_t kMaxTileCols = 256;
constexpr int64_t kSerialPackFloats = int64_t{1} << 18;
// Rows of a stored operand per unit of packing work (see PackRows).
constexpr int64_t kPackRows = 64;

// Packing lays out a strip of op(a) (Mr rows) or op(b) (Nr columns) as k
// groups of W values, one group per step of the inner dimension: the order
// the micro-kernel reads them. Lanes past the matrix's edge are zero.

// Where op(x) is stored with its k steps as rows (op(a) transposed, op(b)
// not): rows [p_begin, p_end) of src, `width` values each (row stride ld),
// go into every strip, dst[q * W * k + p * W + i] = src[p * ld + q * W + i].
// Whole rows are read in order; packing one strip at a time read only W
// values of each row, a whole row apart, and took a third of the time of a
// 64 x 2048 x 2048 product.
template <int W>
void PackRows(const float* src, int64_t ld, int64_t width, int64_t k,
              int64_t p_begin, int64_t p_end, float* dst) {
  const int64_t strips = (width + W - 1) / W;
  for (int64_t p = p_begin; p < p_end; ++p) {
    for (int64_t q = 0; q < strips; ++q) {
      float* out = dst + q * W * k + p * W;
      const int64_t count = std::min<int64_t>(W, width - q * W);
      std::memcpy(out, src + p * ld + q * W, count * sizeof(float));
      std::fill(out + count, out + W, 0.0f);
    }
  }
}

// dst[p * W + i] = src[i * ld + p]: a transpose, done in 4 x 4 SSE blocks
// (baseline x86-64) with scalar edges. Four groups at a time are filled
// whole, so dst is written in order while the `width` rows of src are read
// side by side (a few KB, which stay in L1); going down one row at a time
// instead scattered 16-byte writes over the whole strip, which cost 3 to 4
// times the product itself for a matrix times a vector.
template <int W>
void PackTransposed(const float* src, int64_t ld, int64_t width, int64_t k,
                    float* dst) {
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) {
    float* out = dst + p * W;
    int64_t i = 0;
    for (; i + 4 <= width; i += 4) {
      const float* s = src + i * ld + p;
      __m128 r0 = _mm_loadu_ps(s);
      __m128 r1 = _mm_loadu_ps(s + ld);
      __m128 r2 = _mm_loadu_ps(s + 2 * ld);
      __m128 r3 = _mm_loadu_ps(s + 3 * ld);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(out + i, r0);
      _mm_storeu_ps(out + W + i, r1);
      _mm_storeu_ps(out + 2 * W + i, r2);
      _mm_storeu_ps(out + 3 * W + i, r3);
    }
    for (; i < W; ++i) {
      for (int64_t q = 0; q < 4; ++q) {
        out[q * W + i] = i < width ? src[i * ld + p + q] : 0.0f;
      }
    }
  }
  for (; p < k; ++p) {
    for (int64_t i = 0; i < W; ++i) {
      dst[p * W + i] = i < width ? src[i * ld + p] : 0.0f;
    }
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

  // Units of packing: a block of kPackRows rows of a stored operand whose
  // rows are k steps (see PackRows), or else one strip.
  const int64_t a_units = transpose_a ? CeilDiv(k, kPackRows) : row_panels;
  const int64_t b_units = transpose_b ? col_panels : CeilDiv(k, kPackRows);
  const auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      if (u < a_units && transpose_a) {
        PackRows<Mr>(a, m, m, k, u * kPackRows,
                     std::min(k, (u + 1) * kPackRows), packed_a);
      } else if (u < a_units) {
        PackTransposed<Mr>(a + u * Mr * k, k, std::min<int64_t>(Mr, m - u * Mr),
                           k, packed_a + u * Mr * k);
      } else if (transpose_b) {
        const int64_t j = u - a_units;
        PackTransposed<Nr>(b + j * Nr * k, k, std::min<int64_t>(Nr, n - j * Nr),
                           k, packed_b + j * Nr * k);
      } else {
        const int64_t rows = u - a_units;
        PackRows<Nr>(b, n, n, k, rows * kPackRows,
                     std::min(k, (rows + 1) * kPackRows), packed_b);
      }
    }
  };
  // Small operands are packed on this thread: waking the pool twice per
  // product costs more than the copy.
  if ((row_panels * Mr + col_panels * Nr) * k <= kSerialPackFloats) {
    pack(0, a_units + b_units);
  } else {
    parallel_for(
        a_units + b_units,
        2.0 * (row_panels * Mr + col_panels * Nr) * k / (a_units + b_units),
        pack);
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

// Where the direct paths below write element (i, j) of their product:
// c[i * row + j * col]. A transposed product is written straight into c.
struct OutputStrides {
  int64_t row;
  int64_t col;
};

// Adds a k-block's sums into c: the first block's sums are c.
inline void AddBlock(bool first_block, float sum, float* out) {
  *out = first_block ? sum : *out + sum;
}

// op(a) * b for m <= kMaxStreamRows, b stored k x n.
void GemmStreamRows(StreamRowsFn stream_rows, bool transpose_a, int64_t m,
                    int64_t n, int64_t k, const float* a, const float* b,
                    float* c, OutputStrides out,
                    const ParallelFor& parallel_for) {
  // a(i, p) = a[i * a_row + p * a_step].
  const int64_t a_row = transpose_a ? 1 : k;
  const int64_t a_step = transpose_a ? m : 1;
  parallel_for(CeilDiv(n, kStreamCols), 2.0 * m * k * kStreamCols,
               [&](int64_t begin, int64_t end) {
                 alignas(64) float sums[kMaxStreamRows * kStreamCols];
                 for (int64_t unit = begin; unit < end; ++unit) {
                   const int64_t j0 = unit * kStreamCols;
                   const int64_t cols = std::min(kStreamCols, n - j0);
                   for (int64_t p0 = 0; p0 < k; p0 += kKc) {
                     for (int64_t i = 0; i < m; ++i) {
                       std::fill(sums + i * kStreamCols,
                                 sums + i * kStreamCols + cols, 0.0f);
                     }
                     stream_rows(m, cols, std::min(kKc, k - p0),
                                 a + p0 * a_step, a_row, a_step,
                                 b + p0 * n + j0, n, sums);
                     for (int64_t i = 0; i < m; ++i) {
                       for (int64_t j = 0; j < cols; ++j) {
                         AddBlock(p0 == 0, sums[i * kStreamCols + j],
                                  c + i * out.row + (j0 + j) * out.col);
                       }
                     }
                   }
                 }
               });
}

// a * op(b) for n <= kMaxFewCols, a stored m x k. Columns are taken
// kFewColsPerPass at a time; the block of a stays in L1 between passes.
void GemmFewCols(FewColsFn few_cols, int64_t row_block, bool transpose_b,
                 int64_t m, int64_t n, int64_t k, const float* a,
                 const float* b, float* c, OutputStrides out,
                 const ParallelFor& parallel_for) {
  // op(b)(p, j) = b[p * b_step + j * b_col].
  const int64_t b_step = transpose_b ? 1 : n;
  const int64_t b_col = transpose_b ? k : 1;
  parallel_for(
      CeilDiv(m, row_block), 2.0 * row_block * n * k,
      [&](int64_t begin, int64_t end) {
        alignas(64) float sums[kFewColsPerPass * kAvx512RowBlock];
        for (int64_t unit = begin; unit < end; ++unit) {
          const int64_t i0 = unit * row_block;
          const int64_t rows = std::min(row_block, m - i0);
          for (int64_t p0 = 0; p0 < k; p0 += kKc) {
            for (int64_t j0 = 0; j0 < n; j0 += kFewColsPerPass) {
              const int64_t cols = std::min(kFewColsPerPass, n - j0);
              few_cols(rows, cols, std::min(kKc, k - p0), a + i0 * k + p0, k,
                       b + p0 * b_step + j0 * b_col, b_step, b_col, sums);
              for (int64_t i = 0; i < rows; ++i) {
                for (int64_t j = 0; j < cols; ++j) {
                  AddBlock(p0 == 0, sums[j * row_block + i],
                           c + (i0 + i) * out.row + (j0 + j) * out.col);
                }
              }
            }
          }
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

// The micro-kernel's block of c: rows x cols.
struct BlockShape {
  int64_t rows;
  int64_t cols;
};

BlockShape KernelBlock(Isa isa) {
  return isa == Isa::kAvx512 ? BlockShape{kAvx512Mr, kAvx512Nr}
                             : BlockShape{kAvx2Mr, kAvx2Nr};
}

// Floats of packed a and b for an m x n product over k.
int64_t PackedSize(BlockShape block, int64_t m, int64_t n, int64_t k) {
  return (CeilDiv(m, block.rows) * block.rows +
          CeilDiv(n, block.cols) * block.cols) *
         k;
}

// A product with few columns and more rows would leave most of each block's
// columns (64 with AVX-512) as padding, computed and thrown away; its
// transpose has few rows instead, where blocks are 6 high. Each element of c
// is then the same products summed in the same order, so the bits are the
// same either way. Transposed where that saves a quarter of the padded work
// or more.
bool ComputeTransposed(BlockShape block, int64_t m, int64_t n) {
  const auto padded = [&](int64_t rows, int64_t cols) {
    return CeilDiv(rows, block.rows) * block.rows * CeilDiv(cols, block.cols) *
           block.cols;
  };
  return 4 * padded(n, m) <= 3 * padded(m, n);
}

// Which direct path fits the product (see kMaxStreamRows, kMaxFewCols).
bool StreamsRows(bool transpose_b, int64_t m) {
  return m <= kMaxStreamRows && !transpose_b;
}
bool TakesFewCols(bool transpose_a, int64_t n) {
  return n <= kMaxFewCols && !transpose_a;
}
bool HasDirectPath(bool transpose_a, bool transpose_b, int64_t m, int64_t n) {
  return StreamsRows(transpose_b, m) || TakesFewCols(transpose_a, n);
}

// Runs the product on the direct path that fits it (HasDirectPath is true).
void GemmDirect(Isa isa, bool transpose_a, bool transpose_b, int64_t m,
                int64_t n, int64_t k, const float* a, const float* b, float* c,
                OutputStrides out, const ParallelFor& parallel_for) {
  const bool avx512 = isa == Isa::kAvx512;
  if (StreamsRows(transpose_b, m)) {
    GemmStreamRows(avx512 ? StreamRowsAvx512 : StreamRowsAvx2, transpose_a, m,
                   n, k, a, b, c, out, parallel_for);
  } else {
    GemmFewCols(avx512 ? FewColsAvx512 : FewColsAvx2,
                avx512 ? kAvx512RowBlock : kAvx2RowBlock, transpose_b, m, n, k,
                a, b, c, out, parallel_for);
  }
}

// How Gemm computes a product: directly, directly as its transpose
// c^T = op(b)^T op(a)^T (where op(b) stored as it is suits a direct path),
// packed, or packed as its transpose.
enum class Plan { kDirect, kDirectTransposed, kPacked, kPackedTransposed };

Plan ChoosePlan(BlockShape block, bool transpose_a, bool transpose_b, int64_t m,
                int64_t n) {
  if (HasDirectPath(transpose_a, transpose_b, m, n)) return Plan::kDirect;
  if (HasDirectPath(!transpose_b, !transpose_a, n, m)) {
    return Plan::kDirectTransposed;
  }
  return ComputeTransposed(block, m, n) ? Plan::kPackedTransposed
                                        : Plan::kPacked;
}

void GemmPacked(Isa isa, bool transpose_a, bool transpose_b, int64_t m,
                int64_t n, int64_t k, const float* a, const float* b, float* c,
                float* workspace, int num_threads,
                const ParallelFor& parallel_for) {
  if (isa == Isa::kAvx512) {
    GemmImpl<kAvx512Mr, kAvx512Nr>(KernelAvx512, transpose_a, transpose_b, m, n,
                                   k, a, b, c, workspace, num_threads,
                                   parallel_for);
  } else {
    GemmImpl<kAvx2Mr, kAvx2Nr>(KernelAvx2, transpose_a, transpose_b, m, n, k, a,
                               b, c, workspace, num_threads, parallel_for);
  }
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

int64_t GemmWorkspaceSize(Isa isa, bool transpose_a, bool transpose_b,
                          int64_t m, int64_t n, int64_t k) {
  const BlockShape block = KernelBlock(isa);
  switch (ChoosePlan(block, transpose_a, transpose_b, m, n)) {
    case Plan::kDirect:
    case Plan::kDirectTransposed:
      return 0;
    case Plan::kPacked:
      return PackedSize(block, m, n, k);
    case Plan::kPackedTransposed:
      return PackedSize(block, n, m, k) + m * n;
  }
  return 0;
}

void Gemm(Isa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
          int64_t k, const float* a, const float* b, float* c, float* workspace,
          int num_threads, const ParallelFor& parallel_for) {
  const BlockShape block = KernelBlock(isa);
  // In the transposed plans, op(b) flips to give op(b)^T, and so does op(a).
  switch (ChoosePlan(block, transpose_a, transpose_b, m, n)) {
    case Plan::kDirect:
      GemmDirect(isa, transpose_a, transpose_b, m, n, k, a, b, c, {n, 1},
                 parallel_for);
      return;
    case Plan::kDirectTransposed:
      GemmDirect(isa, !transpose_b, !transpose_a, n, m, k, b, a, c, {1, n},
                 parallel_for);
      return;
    case Plan::kPacked:
      GemmPacked(isa, transpose_a, transpose_b, m, n, k, a, b, c, workspace,
                 num_threads, parallel_for);
      return;
    case Plan::kPackedTransposed: {
      float* c_transposed = workspace + PackedSize(block, n, m, k);
      GemmPacked(isa, !transpose_b, !transpose_a, n, m, k, b, a, c_transposed,
                 workspace, num_threads, parallel_for);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) c[i * n + j] = c_transposed[j * m + i];
      }
      return;
    }
  }
}

}  // namespace matrix_mul_cpu
}  // namespace customops
}  // namespace tensorflow
