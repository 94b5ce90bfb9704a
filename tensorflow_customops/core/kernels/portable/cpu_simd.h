// Wider vectors for CPU loops that must keep their bits.
//
// TensorFlow's compiler flags target baseline x86-64 (SSE2), where the
// kernels' channel loops run several times slower than with wider vectors.
// TFCO_SIMD_CLONES asks GCC to compile a function for AVX-512, AVX2 and the
// baseline, and the loader picks one by the CPU (target_clones). Every
// version does the same IEEE operations in the same order: -ffp-contract=off
// (tensorflow_customops.bzl) keeps GCC from fusing them into FMAs where the
// target has them, so all give the same bits. Cloned functions need internal
// linkage, so that no other translation unit ends up with their AVX-512 or
// AVX2 code, and whatever they call must be inlined into them
// (TFCO_INLINE_INTO_CLONES), or it runs as baseline code.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CPU_SIMD_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CPU_SIMD_H_

#if defined(__x86_64__) && defined(__GNUC__)
#define TFCO_SIMD_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TFCO_SIMD_CLONES
#endif

#define TFCO_INLINE_INTO_CLONES inline __attribute__((always_inline))

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CPU_SIMD_H_
