// float32 matrix product for MatrixMul's CPU kernel: a packed, blocked GEMM,
// and for products with at most 8 rows or 16 columns direct paths that read
// the large operand where it lies; their inner loops are compiled for AVX-512
// or AVX2+FMA and picked at run time. Without those CPU features the caller
// keeps its Eigen contraction.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_CPU_GEMM_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_CPU_GEMM_H_

#include <cstdint>
#include <functional>

namespace tensorflow {
namespace customops {
namespace matrix_mul_cpu {

enum class Isa { kBaseline, kAvx2, kAvx512 };

// The best ISA this CPU supports, decided once per process. For tests, the
// environment variable TFCO_MATMUL_ISA=baseline|avx2 (read at the first call)
// lowers the choice; a request above what the CPU has is ignored.
Isa SelectedIsa();

// Runs fn over [0, units) split into ranges on some threads; cost_per_unit
// is a rough count of cycles per unit.
using ParallelFor = std::function<void(
    int64_t units, double cost_per_unit,
    const std::function<void(int64_t begin, int64_t end)>& fn)>;

// Floats of scratch Gemm needs for this product with this ISA; 0 for
// products that need none.
int64_t GemmWorkspaceSize(Isa isa, bool transpose_a, bool transpose_b,
                          int64_t m, int64_t n, int64_t k);

// Scratch for Gemm, 64-byte aligned; data() is null if allocation failed.
// A product needs (m + n) * k floats, 34 MB for 2048 x 2048 x 2048. The C
// library serves allocations that large with fresh mmaps, whose page faults
// took about 6% of such a product, so a released buffer goes back to one
// process-wide slot, which keeps the largest buffer returned to it (up to
// 256 MB) for the next call; a call that finds the slot empty or too small,
// for example while another product runs, allocates its own.
class Workspace {
 public:
  explicit Workspace(int64_t floats);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  float* data() const { return data_; }

 private:
  float* data_ = nullptr;
  int64_t capacity_ = 0;
};

// The inner dimension is summed in blocks of this many steps (see Gemm).
constexpr int64_t kGemmBlockK = 256;

// c = op(a) * op(b) for row-major, densely stored matrices: op(a) is m x k
// (a is k x m when transpose_a), op(b) is k x n (b is n x k when
// transpose_b), c is m x n; m, n, k >= 1 and isa is not kBaseline.
// Each element of c is the sum, in order, of per-block sums over the blocks
// of kGemmBlockK steps of k, each accumulated from zero in k order with fused
// multiply-adds. That holds on every path (packed, or reading a or b in
// place for products with few rows or columns), so the bits depend on
// neither the thread count nor the ISA (AVX2 or AVX-512), only on the
// inputs. num_threads only shapes the split of the work.
void Gemm(Isa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
          int64_t k, const float* a, const float* b, float* c, float* workspace,
          int num_threads, const ParallelFor& parallel_for);

}  // namespace matrix_mul_cpu
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_MATRIX_MUL_CPU_GEMM_H_
