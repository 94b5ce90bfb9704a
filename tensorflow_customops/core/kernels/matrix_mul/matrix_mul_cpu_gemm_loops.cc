// Why function-level target attributes, and why they are safe here: the
// library is built for baseline x86-64, and compiling a whole file with
// -mavx512f would also compile every inline function and template it uses
// (Eigen, std::) with AVX-512; the linker keeps one copy of each, so other
// files could end up calling AVX-512 code on CPUs without it. Only the inner
// loops in this file carry target(...) attributes (the micro-kernels of the
// packed product and the loops of the two direct paths, one of each per
// ISA); they are neither inline nor templates, so each is the one definition
// of its name, and they call nothing but the always-inline intrinsics of
// <immintrin.h>. Everything else in the library is baseline code.

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm_loops.h"

#include <immintrin.h>

namespace tensorflow {
namespace customops {
namespace matrix_mul_cpu {

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

// Up to kStreamSteps steps of p are taken per load and store of the sums;
// those rows of b stay in L1 while every row of sums passes over them.
constexpr int kStreamSteps = 4;

__attribute__((target("avx512f"))) void StreamRowsAvx512(
    int64_t rows, int64_t cols, int64_t kc, const float* a, int64_t a_row,
    int64_t a_step, const float* b, int64_t ldb, float* sums) {
  const int64_t full = cols / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (cols - full)) - 1);
  for (int64_t p = 0; p < kc; p += kStreamSteps) {
    const int64_t steps = kc - p < kStreamSteps ? kc - p : kStreamSteps;
    for (int64_t i = 0; i < rows; ++i) {
      __m512 a_ip[kStreamSteps];
#pragma GCC unroll 4
      for (int s = 0; s < kStreamSteps; ++s) {
        a_ip[s] =
            _mm512_set1_ps(s < steps ? a[i * a_row + (p + s) * a_step] : 0.0f);
      }
      float* row_sums = sums + i * kStreamCols;
      for (int64_t j = 0; j < cols; j += 16) {
        const __mmask16 mask = j < full ? 0xffff : tail;
        __m512 sum = _mm512_maskz_loadu_ps(mask, row_sums + j);
#pragma GCC unroll 4
        for (int s = 0; s < kStreamSteps; ++s) {
          if (s < steps) {
            sum = _mm512_fmadd_ps(
                a_ip[s], _mm512_maskz_loadu_ps(mask, b + (p + s) * ldb + j),
                sum);
          }
        }
        _mm512_mask_storeu_ps(row_sums + j, mask, sum);
      }
    }
  }
}

__attribute__((target("avx2,fma"))) void StreamRowsAvx2(
    int64_t rows, int64_t cols, int64_t kc, const float* a, int64_t a_row,
    int64_t a_step, const float* b, int64_t ldb, float* sums) {
  const int64_t full = cols / 8 * 8;
  for (int64_t p = 0; p < kc; p += kStreamSteps) {
    const int64_t steps = kc - p < kStreamSteps ? kc - p : kStreamSteps;
    for (int64_t i = 0; i < rows; ++i) {
      float a_ip[kStreamSteps];
#pragma GCC unroll 4
      for (int s = 0; s < kStreamSteps; ++s) {
        a_ip[s] = s < steps ? a[i * a_row + (p + s) * a_step] : 0.0f;
      }
      float* row_sums = sums + i * kStreamCols;
      int64_t j = 0;
      for (; j < full; j += 8) {
        __m256 sum = _mm256_loadu_ps(row_sums + j);
#pragma GCC unroll 4
        for (int s = 0; s < kStreamSteps; ++s) {
          if (s < steps) {
            sum = _mm256_fmadd_ps(_mm256_set1_ps(a_ip[s]),
                                  _mm256_loadu_ps(b + (p + s) * ldb + j), sum);
          }
        }
        _mm256_storeu_ps(row_sums + j, sum);
      }
      for (; j < cols; ++j) {
        __m128 sum = _mm_set_ss(row_sums[j]);
        for (int64_t s = 0; s < steps; ++s) {
          sum = _mm_fmadd_ss(_mm_set_ss(a_ip[s]),
                             _mm_set_ss(b[(p + s) * ldb + j]), sum);
        }
        row_sums[j] = _mm_cvtss_f32(sum);
      }
    }
  }
}

__attribute__((target("avx512f"))) void FewColsAvx512(
    int64_t rows, int64_t n, int64_t kc, const float* a, int64_t lda,
    const float* b, int64_t b_step, int64_t b_col, float* sums) {
  constexpr __mmask16 kAll16 = 0xffff;
  constexpr __mmask8 kAll8 = 0xff;
  __m512 acc[kFewColsPerPass];
#pragma GCC unroll 8
  for (int j = 0; j < kFewColsPerPass; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p += 16) {
    const int64_t width = kc - p < 16 ? kc - p : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << width) - 1);
    __m512 r[16];
    __m512 t[16];
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) {
      r[q] = q < rows ? _mm512_maskz_loadu_ps(mask, a + q * lda + p)
                      : _mm512_setzero_ps();
    }
    // Transpose: afterwards r[q] holds element p + q of each row. (The
    // zero-masking forms with full masks are the plain instructions; GCC 12
    // warns about the undefined register inside the unmasked ones.)
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      t[2 * q] = _mm512_maskz_unpacklo_ps(kAll16, r[2 * q], r[2 * q + 1]);
      t[2 * q + 1] = _mm512_maskz_unpackhi_ps(kAll16, r[2 * q], r[2 * q + 1]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512d t0 = _mm512_castps_pd(t[4 * q]);
      const __m512d t1 = _mm512_castps_pd(t[4 * q + 1]);
      const __m512d t2 = _mm512_castps_pd(t[4 * q + 2]);
      const __m512d t3 = _mm512_castps_pd(t[4 * q + 3]);
      r[4 * q] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, t0, t2));
      r[4 * q + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, t0, t2));
      r[4 * q + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, t1, t3));
      r[4 * q + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, t1, t3));
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const int lo = q / 4 * 8 + q % 4;
      t[lo] = _mm512_maskz_shuffle_f32x4(kAll16, r[lo], r[lo + 4], 0x88);
      t[lo + 4] = _mm512_maskz_shuffle_f32x4(kAll16, r[lo], r[lo + 4], 0xdd);
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      r[q] = _mm512_maskz_shuffle_f32x4(kAll16, t[q], t[q + 8], 0x88);
      r[q + 8] = _mm512_maskz_shuffle_f32x4(kAll16, t[q], t[q + 8], 0xdd);
    }
    for (int64_t q = 0; q < width; ++q) {
      const float* b_p = b + (p + q) * b_step;
#pragma GCC unroll 8
      for (int j = 0; j < kFewColsPerPass; ++j) {
        if (j < n) {
          acc[j] =
              _mm512_fmadd_ps(r[q], _mm512_set1_ps(b_p[j * b_col]), acc[j]);
        }
      }
    }
  }
  for (int j = 0; j < n; ++j) {
    _mm512_storeu_ps(sums + j * kAvx512RowBlock, acc[j]);
  }
}

__attribute__((target("avx2,fma"))) void FewColsAvx2(
    int64_t rows, int64_t n, int64_t kc, const float* a, int64_t lda,
    const float* b, int64_t b_step, int64_t b_col, float* sums) {
  __m256 acc[kFewColsPerPass];
#pragma GCC unroll 8
  for (int j = 0; j < kFewColsPerPass; ++j) acc[j] = _mm256_setzero_ps();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t p = 0; p < kc; p += 8) {
    const int64_t width = kc - p < 8 ? kc - p : 8;
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(width)), lane);
    __m256 r[8];
    __m256 t[8];
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      r[q] = q < rows ? _mm256_maskload_ps(a + q * lda + p, mask)
                      : _mm256_setzero_ps();
    }
    // Transpose: afterwards t[q] holds element p + q of each row.
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      t[2 * q] = _mm256_unpacklo_ps(r[2 * q], r[2 * q + 1]);
      t[2 * q + 1] = _mm256_unpackhi_ps(r[2 * q], r[2 * q + 1]);
    }
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      r[4 * q] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
      r[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0xee);
      r[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
      r[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      t[q] = _mm256_permute2f128_ps(r[q], r[q + 4], 0x20);
      t[q + 4] = _mm256_permute2f128_ps(r[q], r[q + 4], 0x31);
    }
    for (int64_t q = 0; q < width; ++q) {
      const float* b_p = b + (p + q) * b_step;
#pragma GCC unroll 8
      for (int j = 0; j < kFewColsPerPass; ++j) {
        if (j < n) {
          acc[j] =
              _mm256_fmadd_ps(t[q], _mm256_set1_ps(b_p[j * b_col]), acc[j]);
        }
      }
    }
  }
  for (int j = 0; j < n; ++j) {
    _mm256_storeu_ps(sums + j * kAvx2RowBlock, acc[j]);
  }
}

}  // namespace matrix_mul_cpu
}  // namespace customops
}  // namespace tensorflow
