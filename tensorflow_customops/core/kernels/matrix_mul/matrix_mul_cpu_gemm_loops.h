// The inner loops of matrix_mul_cpu::Gemm (matrix_mul_cpu_gemm.h), one of
// each per ISA: the micro-kernels of the packed product and the loops of the
// two direct paths. matrix_mul_cpu_gemm_loops.cc says why they alone carry
// target attributes.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_CPU_GEMM_LOOPS_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_CPU_GEMM_LOOPS_H_

#include <cstdint>

namespace tensorflow {
namespace customops {
namespace matrix_mul_cpu {

// Micro-kernels for an Mr x Nr block: c[i, j] = (accumulate ? c[i, j] : 0) +
// the sum over p < kc of a[p * Mr + i] * b[p * Nr + j], accumulated from zero
// in p order with fused multiply-adds. a and b are packed (PackRows and
// PackTransposed in matrix_mul_cpu_gemm.cc).
// The AVX-512 block is 6 rows by 4 vectors: per step of p it loads 4 vectors
// of b and broadcasts 6 values of a for 24 multiply-adds. Measured against 12
// rows by 2 vectors (14 loads per 24 multiply-adds), it was 3 to 5% faster.
constexpr int kAvx512Mr = 6;
constexpr int kAvx512Vectors = 4;
constexpr int kAvx512Nr = 16 * kAvx512Vectors;
constexpr int kAvx2Mr = 6;
constexpr int kAvx2Nr = 16;

using KernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c,
                          int64_t ldc, bool accumulate);

void KernelAvx512(int64_t kc, const float* a, const float* b, float* c,
                  int64_t ldc, bool accumulate);
void KernelAvx2(int64_t kc, const float* a, const float* b, float* c,
                int64_t ldc, bool accumulate);

// Products with few rows whose op(b) is stored row by row (a vector times a
// matrix, a small batch through a dense layer) read b where it lies instead
// of packing it: packing would copy all of b, which each row block then
// reads once, so it tripled the memory traffic. Each unit of work is a run
// of up to kStreamCols columns of c; for every p it reads that run of row p
// of b (contiguous) and adds a(i, p) times it into per-row sums, which stay
// in L1. Sums follow the packed kernels' order exactly: per k-block of
// kGemmBlockK, from zero in p order with fused multiply-adds, then added to c.
constexpr int64_t kMaxStreamRows = 8;
constexpr int64_t kStreamCols = 512;

// Sums over p < kc of a[i * a_row + p * a_step] * b[p * ldb + j] for i < rows
// and j < cols, into sums (row stride kStreamCols), which start at zero.
using StreamRowsFn = void (*)(int64_t rows, int64_t cols, int64_t kc,
                              const float* a, int64_t a_row, int64_t a_step,
                              const float* b, int64_t ldb, float* sums);
void StreamRowsAvx512(int64_t rows, int64_t cols, int64_t kc, const float* a,
                      int64_t a_row, int64_t a_step, const float* b,
                      int64_t ldb, float* sums);
void StreamRowsAvx2(int64_t rows, int64_t cols, int64_t kc, const float* a,
                    int64_t a_row, int64_t a_step, const float* b, int64_t ldb,
                    float* sums);

// Products with few columns whose op(a) is stored row by row (a matrix times
// a vector or a few) read a where it lies too. They take 16 rows of a at a
// time (8 with AVX2) and transpose each 16 x 16 block in registers, so that
// one vector holds column p of the block and each row's sum still runs in p
// order, as in the packed kernels.
constexpr int64_t kMaxFewCols = 16;
constexpr int64_t kFewColsPerPass = 8;
constexpr int64_t kAvx512RowBlock = 16;
constexpr int64_t kAvx2RowBlock = 8;

// For i < rows (at most the ISA's row block) and j < n (at most
// kFewColsPerPass): sums[j * row block + i] = the sum over p < kc of
// a[i * lda + p] * b[p * b_step + j * b_col], from zero in p order with fused
// multiply-adds.
using FewColsFn = void (*)(int64_t rows, int64_t n, int64_t kc, const float* a,
                           int64_t lda, const float* b, int64_t b_step,
                           int64_t b_col, float* sums);
void FewColsAvx512(int64_t rows, int64_t n, int64_t kc, const float* a,
                   int64_t lda, const float* b, int64_t b_step, int64_t b_col,
                   float* sums);
void FewColsAvx2(int64_t rows, int64_t n, int64_t kc, const float* a,
                 int64_t lda, const float* b, int64_t b_step, int64_t b_col,
                 float* sums);

}  // namespace matrix_mul_cpu
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_CPU_GEMM_LOOPS_H_
