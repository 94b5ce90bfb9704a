// C++ checks of MatrixMul's float32 CPU GEMM (matrix_mul_cpu_gemm.h), called
// directly for every ISA this CPU has: exact results where float sums are
// exact, the same bits for every thread count and for AVX2 and AVX-512, and
// no write outside the output or the workspace. Run it under
// `bazel test --config=asan` or `--config=ubsan` for the memory checks too.
// CHECK failures abort, which fails the test.

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "tensorflow/core/platform/logging.h"

namespace tensorflow {
namespace customops {
namespace matrix_mul_cpu {
namespace {

// Fills around a buffer, to catch writes past either end.
constexpr int64_t kGuard = 64;
constexpr float kSentinel = -12345.5f;

// A buffer of n floats with kGuard sentinels on each side.
class Guarded {
 public:
  explicit Guarded(int64_t n) : n_(n), data_(n + 2 * kGuard, kSentinel) {}
  float* get() { return data_.data() + kGuard; }
  const float* get() const { return data_.data() + kGuard; }
  void CheckGuards(const char* what) const {
    for (int64_t i = 0; i < kGuard; ++i) {
      CHECK_EQ(data_[i], kSentinel) << what << ": written before the start";
      CHECK_EQ(data_[kGuard + n_ + i], kSentinel) << what << ": written past "
                                                  << "the end";
    }
  }

 private:
  int64_t n_;
  std::vector<float> data_;
};

// Splits [0, units) into one range per thread, each on its own std::thread.
ParallelFor ThreadsParallelFor(int threads) {
  return [threads](int64_t units, double,
                   const std::function<void(int64_t, int64_t)>& fn) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = units * t / threads;
      const int64_t end = units * (t + 1) / threads;
      if (begin < end) workers.emplace_back(fn, begin, end);
    }
    for (std::thread& worker : workers) worker.join();
  };
}

struct Problem {
  bool transpose_a;
  bool transpose_b;
  int64_t m;
  int64_t n;
  int64_t k;
  std::vector<float> a;  // m x k, or k x m when transposed
  std::vector<float> b;  // k x n, or n x k when transposed
};

Problem MakeProblem(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                    int64_t k, bool small_integers, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> integer(-4, 4);
  std::normal_distribution<float> normal;
  Problem p{transpose_a, transpose_b, m, n, k, {}, {}};
  for (std::vector<float>* v : {&p.a, &p.b}) {
    v->resize(v == &p.a ? m * k : k * n);
    for (float& x : *v) x = small_integers ? integer(rng) : normal(rng);
  }
  return p;
}

// op(a) * op(b) in double, element by element.
std::vector<double> Reference(const Problem& p) {
  std::vector<double> c(p.m * p.n);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const float x = p.transpose_a ? p.a[q * p.m + i] : p.a[i * p.k + q];
        const float y = p.transpose_b ? p.b[j * p.k + q] : p.b[q * p.n + j];
        sum += static_cast<double>(x) * y;
      }
      c[i * p.n + j] = sum;
    }
  }
  return c;
}

std::vector<float> Run(const Problem& p, Isa isa, int threads) {
  Guarded c(p.m * p.n);
  Guarded workspace(
      GemmWorkspaceSize(isa, p.transpose_a, p.transpose_b, p.m, p.n, p.k));
  Gemm(isa, p.transpose_a, p.transpose_b, p.m, p.n, p.k, p.a.data(), p.b.data(),
       c.get(), workspace.get(), threads, ThreadsParallelFor(threads));
  c.CheckGuards("c");
  workspace.CheckGuards("workspace");
  return std::vector<float>(c.get(), c.get() + p.m * p.n);
}

std::vector<Isa> AvailableIsas() {
  __builtin_cpu_init();
  std::vector<Isa> isas;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isas.push_back(Isa::kAvx2);
  }
  if (__builtin_cpu_supports("avx512f")) isas.push_back(Isa::kAvx512);
  return isas;
}

// Sizes around the micro-tile edges (6 rows; 16 columns for AVX2, 64 for
// AVX-512) and the k-block of 256; the largest pack on several threads.
const int64_t kRows[] = {1, 5, 6, 7, 13, 37, 300};
const int64_t kCols[] = {1, 15, 16, 17, 63, 64, 65, 300};
const int64_t kInner[] = {1, 7, 255, 256, 257, 600};

// Small integers make every partial sum exact in float, so any order of
// summation must give the reference exactly.
void TestExactOnIntegers(const std::vector<Isa>& isas) {
  int cases = 0;
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      for (int64_t m : kRows) {
        for (int64_t n : kCols) {
          for (int64_t k : kInner) {
            if (m * n * k > 300 * 70 * 600) continue;  // keeps the test fast
            const Problem p = MakeProblem(transpose_a, transpose_b, m, n, k,
                                          /*small_integers=*/true, cases);
            const std::vector<double> expected = Reference(p);
            for (Isa isa : isas) {
              const std::vector<float> c = Run(p, isa, 3);
              for (int64_t i = 0; i < m * n; ++i) {
                CHECK_EQ(static_cast<double>(c[i]), expected[i])
                    << "m=" << m << " n=" << n << " k=" << k
                    << " transpose_a=" << transpose_a
                    << " transpose_b=" << transpose_b << " element " << i;
              }
            }
            ++cases;
          }
        }
      }
    }
  }
  std::printf("exact on small integers: %d shapes x %zu ISAs\n", cases,
              isas.size());
}

// op(a) * op(b) in float, in the order Gemm documents: per block of
// kGemmBlockK steps, a fused multiply-add chain from zero in k order; the
// block sums added to c in order.
std::vector<float> DocumentedOrder(const Problem& p) {
  std::vector<float> c(p.m * p.n);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      float sum = 0;
      for (int64_t q0 = 0; q0 < p.k; q0 += kGemmBlockK) {
        float block = 0;
        for (int64_t q = q0; q < std::min(p.k, q0 + kGemmBlockK); ++q) {
          const float x = p.transpose_a ? p.a[q * p.m + i] : p.a[i * p.k + q];
          const float y = p.transpose_b ? p.b[j * p.k + q] : p.b[q * p.n + j];
          block = std::fma(x, y, block);
        }
        sum = q0 == 0 ? block : sum + block;
      }
      c[i * p.n + j] = sum;
    }
  }
  return c;
}

// Random normal inputs: close to the double reference, exactly the documented
// order's bits, and so bit-identical for 1, 2, 3 and 7 threads and on each
// ISA. The shapes reach every path: packed, packed as the transposed product,
// few rows (b read in place), few columns (a read in place), and either of
// those as the transposed product.
void TestSameBitsEverywhere(const std::vector<Isa>& isas) {
  const int64_t shapes[][3] = {{300, 300, 600}, {13, 33, 257}, {1, 300, 513},
                               {300, 1, 300},   {8, 70, 257},  {9, 33, 513},
                               {37, 16, 513},   {40, 17, 300}, {300, 17, 300},
                               {64, 65, 300}};
  int runs = 0;
  for (const auto& shape : shapes) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        const Problem p = MakeProblem(transpose_a, transpose_b, shape[0],
                                      shape[1], shape[2], false, runs);
        const std::vector<double> expected = Reference(p);
        const std::vector<float> first = Run(p, isas.front(), 1);
        for (int64_t i = 0; i < p.m * p.n; ++i) {
          CHECK_LE(std::abs(first[i] - expected[i]), 1e-4 * std::sqrt(p.k))
              << "element " << i;
        }
        CHECK(std::memcmp(first.data(), DocumentedOrder(p).data(),
                          first.size() * sizeof(float)) == 0)
            << "not the documented order: m=" << p.m << " n=" << p.n
            << " k=" << p.k << " transpose_a=" << transpose_a
            << " transpose_b=" << transpose_b;
        for (Isa isa : isas) {
          for (int threads : {1, 2, 3, 7}) {
            const std::vector<float> c = Run(p, isa, threads);
            CHECK(std::memcmp(c.data(), first.data(),
                              c.size() * sizeof(float)) == 0)
                << "other bits with " << threads << " threads, ISA "
                << static_cast<int>(isa) << ", m=" << p.m << " n=" << p.n
                << " k=" << p.k;
            ++runs;
          }
        }
      }
    }
  }
  std::printf(
      "the documented order's bits for every thread count and ISA: %d runs\n",
      runs);
}

// A released buffer is handed to the next product that fits in it; two
// products at once get different buffers.
void TestWorkspaceReuse() {
  float* first;
  {
    Workspace workspace(1 << 20);
    first = workspace.data();
    CHECK(first != nullptr);
    CHECK_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    first[(1 << 20) - 1] = 1.0f;  // the whole size is usable
  }
  {
    Workspace smaller(1000);
    CHECK_EQ(smaller.data(), first);
    Workspace concurrent(1000);
    CHECK(concurrent.data() != nullptr);
    CHECK(concurrent.data() != first);
  }
  {
    Workspace larger((1 << 20) + 1);
    CHECK(larger.data() != nullptr);
    larger.data()[1 << 20] = 1.0f;
  }
  CHECK(Workspace(-1).data() == nullptr);
  CHECK(Workspace(std::numeric_limits<int64_t>::max()).data() == nullptr);
  std::printf("workspace reuse: ok\n");
}

}  // namespace
}  // namespace matrix_mul_cpu
}  // namespace customops
}  // namespace tensorflow

int main() {
  using namespace tensorflow::customops::
      matrix_mul_cpu;  // NOLINT(build/namespaces)
  const std::vector<Isa> isas = AvailableIsas();
  if (isas.empty()) {
    std::printf("SKIPPED: this CPU has neither AVX2+FMA nor AVX-512\n");
    return 0;
  }
  TestWorkspaceReuse();
  TestExactOnIntegers(isas);
  TestSameBitsEverywhere(isas);
  std::printf("PASSED\n");
  return 0;
}
