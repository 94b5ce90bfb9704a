// CPU kernels of CustomOps>DeformableConv2d and its gradient op.
//
// Both passes walk the output pixels of all images in blocks. A block's
// column buffer holds, per pixel, the C * kh * kw masked bilinear samples
// (im2col); a GEMM per group multiplies it with the filter. The backward
// pass rebuilds the columns, takes the filter gradient and the column
// gradient from two GEMMs, scatters the column gradient onto the input
// (col2im) and reduces it against the sampled corners for the offset and
// mask gradients.
// The sampling loops are in deform_conv2d_cpu_sampling.cc.
//
// Determinism: blocks run in order, each element of a result is summed by
// one thread in an order fixed by the geometry alone, and the GEMMs sum in
// an order that does not depend on the thread count (matrix_mul_cpu_gemm.h,
// or Product's row loop), so the bits do not depend on the thread count.

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_cpu_sampling.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"
#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm.h"

namespace tensorflow {
namespace customops {
namespace {

// Scratch that grows with the block (columns, their gradient, the GEMMs'
// packed copies and the output block) is kept within this many bytes; a
// block is never smaller than one pixel.
constexpr int64_t kBlockScratchBytes = int64_t{64} << 20;

template <typename A>
using Buffer = std::vector<A, Eigen::aligned_allocator<A>>;

using deform_conv2d::Strides;
using deform_conv2d_cpu::Col2Im;
using deform_conv2d_cpu::Im2Col;
using deform_conv2d_cpu::OffsetMaskGrad;
using deform_conv2d_cpu::Sampler;
using deform_conv2d_cpu::Segment;
using deform_conv2d_cpu::Segments;
using deform_conv2d_cpu::Shape;

// c = op(a) * op(b), row-major and dense (matrix_mul_cpu::Gemm's contract),
// m, n, k >= 1. float runs the project's AVX2/AVX-512 GEMM where the CPU has
// it; otherwise each row of c is summed by one thread in k order.
template <typename A>
class Product {
 public:
  // Sizes the scratch for products of at most these shapes.
  Product(const CPUDevice& d, std::initializer_list<std::array<int64_t, 5>>
                                  shapes /* ta, tb, m, n, k */)
      : d_(d) {
    if constexpr (std::is_same<A, float>::value) {
      isa_ = matrix_mul_cpu::SelectedIsa();
      if (isa_ != matrix_mul_cpu::Isa::kBaseline) {
        int64_t floats = 0;
        for (const auto& s : shapes) {
          floats = std::max(floats,
                            matrix_mul_cpu::GemmWorkspaceSize(
                                isa_, s[0] != 0, s[1] != 0, s[2], s[3], s[4]));
        }
        workspace_.reset(new matrix_mul_cpu::Workspace(floats));
        if (floats > 0 && workspace_->data() == nullptr) throw std::bad_alloc();
      }
    }
  }

  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const A* a,
                  const A* b, A* c) const {
    if constexpr (std::is_same<A, float>::value) {
      if (isa_ != matrix_mul_cpu::Isa::kBaseline) {
        matrix_mul_cpu::Gemm(
            isa_, ta, tb, m, n, k, a, b, c, workspace_->data(), d_.numThreads(),
            [this](int64_t units, double cost,
                   const std::function<void(int64_t, int64_t)>& fn) {
              d_.parallelFor(units, Eigen::TensorOpCost(0, 0, cost), fn);
            });
        return;
      }
    }
    const int64_t lda_row = ta ? 1 : k, lda_col = ta ? m : 1;
    const int64_t ldb_row = tb ? 1 : n, ldb_col = tb ? k : 1;
    d_.parallelFor(
        m, Eigen::TensorOpCost(k * sizeof(A), n * sizeof(A), 2.0 * k * n),
        [&](Eigen::Index begin, Eigen::Index end) {
          for (Eigen::Index i = begin; i < end; ++i) {
            A* row = c + i * n;
            std::fill(row, row + n, A(0));
            for (int64_t l = 0; l < k; ++l) {
              const A ail = a[i * lda_row + l * lda_col];
              const A* bl = b + l * ldb_row;
              for (int64_t j = 0; j < n; ++j) row[j] += ail * bl[j * ldb_col];
            }
          }
        });
  }

 private:
  const CPUDevice& d_;
  matrix_mul_cpu::Isa isa_ = matrix_mul_cpu::Isa::kBaseline;
  std::unique_ptr<matrix_mul_cpu::Workspace> workspace_;
};

// The filter as [groups][kh * kw * C / groups][O / groups] in A.
template <typename T, typename A>
Buffer<A> PackFilter(const CPUDevice& d, const Shape& s, const T* filter) {
  Buffer<A> packed(s.args.groups * s.kg * s.og);
  d.parallelFor(s.args.groups * s.kg,
                Eigen::TensorOpCost(s.og * sizeof(T), 0, s.og),
                [&](Eigen::Index begin, Eigen::Index end) {
                  for (Eigen::Index r = begin; r < end; ++r) {
                    const int64_t g = r / s.kg, row = r % s.kg;
                    const T* from = filter + row * s.args.o + g * s.og;
                    A* to = packed.data() + r * s.og;
                    for (int64_t o = 0; o < s.og; ++o)
                      to[o] = static_cast<A>(from[o]);
                  }
                });
  return packed;
}

// Output pixels per block, for `per_pixel` elements of A of scratch per
// pixel.
template <typename A>
int64_t BlockPixels(const Shape& s, int64_t per_pixel) {
  const int64_t bytes = std::max<int64_t>(per_pixel * sizeof(A), 1);
  return std::max<int64_t>(1, std::min(s.pixels, kBlockScratchBytes / bytes));
}

// Copies [groups][count][O / groups] of A to or from a map of O channels
// over the output pixels, from pixel p0 on.
template <typename T, typename A>
void ToMap(const CPUDevice& d, const Shape& s, int64_t p0, int64_t count,
           const A* block, T* map) {
  const Strides out = s.Map(s.args.o);
  d.parallelFor(
      count,
      Eigen::TensorOpCost(s.args.o * sizeof(A), s.args.o * sizeof(T), s.args.o),
      [&](Eigen::Index begin, Eigen::Index end) {
        for (Eigen::Index local = begin; local < end; ++local) {
          const int64_t p = p0 + local;
          T* to = map + (p / s.plane) * out.n + (p % s.plane) * out.y;
          for (int64_t g = 0; g < s.args.groups; ++g) {
            const A* from = block + (g * count + local) * s.og;
            for (int64_t o = 0; o < s.og; ++o) {
              to[(g * s.og + o) * out.c] = static_cast<T>(from[o]);
            }
          }
        }
      });
}

template <typename T, typename A>
void FromMap(const CPUDevice& d, const Shape& s, int64_t p0, int64_t count,
             const T* map, A* block) {
  const Strides out = s.Map(s.args.o);
  d.parallelFor(
      count,
      Eigen::TensorOpCost(s.args.o * sizeof(T), s.args.o * sizeof(A), s.args.o),
      [&](Eigen::Index begin, Eigen::Index end) {
        for (Eigen::Index local = begin; local < end; ++local) {
          const int64_t p = p0 + local;
          const T* from = map + (p / s.plane) * out.n + (p % s.plane) * out.y;
          for (int64_t g = 0; g < s.args.groups; ++g) {
            A* to = block + (g * count + local) * s.og;
            for (int64_t o = 0; o < s.og; ++o) {
              to[o] = static_cast<A>(from[(g * s.og + o) * out.c]);
            }
          }
        }
      });
}

// The GEMM writes the output (or reads its gradient) in place when the
// block is a dense [count, O] stretch of it in A.
template <typename T, typename A>
bool DirectMap(const Shape& s) {
  return std::is_same<T, A>::value && !s.args.nchw && s.args.groups == 1;
}

template <typename T>
void Fill(const CPUDevice& d, T* data, int64_t size, T value) {
  if (size == 0) return;
  typename TTypes<T>::Flat(data, size).device(d.eigen()) =
      typename TTypes<T>::Flat(data, size).constant(value);
}

}  // namespace

namespace functor {

template <typename T>
struct DeformableConv2d<CPUDevice, T> {
  void operator()(const CPUDevice& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, T* output) {
    typedef DeformConvAccumulator<T> A;
    const Shape s(args);
    if (s.pixels == 0 || args.o == 0) return;
    const Buffer<A> weights = PackFilter<T, A>(d, s, filter);
    const std::vector<Segment> segments = Segments(s);
    const Sampler<T, A> sampler(s, input, offset, mask);
    const bool direct = DirectMap<T, A>(s);
    const int64_t block =
        BlockPixels<A>(s, args.c * s.taps + s.kg + s.og + args.o);
    Buffer<A> col(block * args.c * s.taps);
    Buffer<A> out(direct ? 0 : block * args.o);
    const Product<A> product(d, {{0, 0, block, s.og, s.kg}});
    for (int64_t p0 = 0; p0 < s.pixels; p0 += block) {
      const int64_t count = std::min(block, s.pixels - p0);
      Im2Col(d, sampler, segments, p0, count, col.data());
      A* result =
          direct ? reinterpret_cast<A*>(output) + p0 * args.o : out.data();
      for (int64_t g = 0; g < args.groups; ++g) {
        product(false, false, count, s.og, s.kg, col.data() + g * count * s.kg,
                weights.data() + g * s.kg * s.og, result + g * count * s.og);
      }
      if (!direct) ToMap(d, s, p0, count, out.data(), output);
    }
  }
};

template <typename T>
struct DeformableConv2dGrad<CPUDevice, T> {
  void operator()(const CPUDevice& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, const T* grad_output, T* grad_input,
                  T* grad_filter, T* grad_offset, T* grad_mask) {
    typedef DeformConvAccumulator<T> A;
    const Shape s(args);
    const int64_t input_size = args.n * args.h * args.w * args.c;
    const int64_t filter_size = s.kg * args.o;
    if (s.pixels == 0 || args.o == 0) {
      // Nothing flows back: an empty batch or output, or no filters.
      Fill(d, grad_input, input_size, T(0));
      Fill(d, grad_filter, filter_size, T(0));
      Fill(d, grad_offset, s.pixels * 2 * args.offset_groups * s.taps, T(0));
      if (args.use_mask) {
        Fill(d, grad_mask, s.pixels * args.offset_groups * s.taps, T(0));
      }
      return;
    }
    const Buffer<A> weights = PackFilter<T, A>(d, s, filter);
    const std::vector<Segment> segments = Segments(s);
    const Sampler<T, A> sampler(s, input, offset, mask);
    const bool direct = DirectMap<T, A>(s);
    const int64_t block = BlockPixels<A>(
        s, 2 * args.c * s.taps + s.kg + s.og + (direct ? 0 : args.o));
    Buffer<A> col(block * args.c * s.taps), dcol(block * args.c * s.taps);
    Buffer<A> dy(direct ? 0 : block * args.o);
    // The filter gradient accumulates over blocks in A, as does the input
    // gradient, in place unless T is narrower.
    Buffer<A> dweights(args.groups * s.kg * s.og, A(0));
    Buffer<A> dweights_block(args.groups * s.kg * s.og);
    Buffer<A> grad_input_wide(std::is_same<T, A>::value ? 0 : input_size);
    A* dinput = std::is_same<T, A>::value ? reinterpret_cast<A*>(grad_input)
                                          : grad_input_wide.data();
    Fill(d, dinput, input_size, A(0));
    const Product<A> product(
        d, {{1, 0, s.kg, s.og, block}, {0, 1, block, s.kg, s.og}});
    for (int64_t p0 = 0; p0 < s.pixels; p0 += block) {
      const int64_t count = std::min(block, s.pixels - p0);
      Im2Col(d, sampler, segments, p0, count, col.data());
      const A* dy_block =
          direct ? reinterpret_cast<const A*>(grad_output) + p0 * args.o
                 : dy.data();
      if (!direct) FromMap(d, s, p0, count, grad_output, dy.data());
      for (int64_t g = 0; g < args.groups; ++g) {
        const A* col_g = col.data() + g * count * s.kg;
        const A* dy_g = dy_block + g * count * s.og;
        product(true, false, s.kg, s.og, count, col_g, dy_g,
                dweights_block.data() + g * s.kg * s.og);
        product(false, true, count, s.kg, s.og, dy_g,
                weights.data() + g * s.kg * s.og,
                dcol.data() + g * count * s.kg);
      }
      typename TTypes<A>::Flat(dweights.data(), dweights.size())
          .device(d.eigen()) += typename TTypes<A>::Flat(dweights_block.data(),
                                                         dweights_block.size());
      Col2Im(d, sampler, segments, p0, count, dcol.data(), dinput);
      OffsetMaskGrad(d, sampler, segments, p0, count, dcol.data(), grad_offset,
                     args.use_mask ? grad_mask : nullptr);
    }
    if (!std::is_same<T, A>::value) {
      typename TTypes<T>::Flat(grad_input, input_size).device(d.eigen()) =
          typename TTypes<A>::Flat(dinput, input_size).template cast<T>();
    }
    // Back to HWIO: row r of group g is filter row r, columns g * O / groups
    // on.
    d.parallelFor(
        s.kg,
        Eigen::TensorOpCost(args.o * sizeof(A), args.o * sizeof(T), args.o),
        [&](Eigen::Index begin, Eigen::Index end) {
          for (Eigen::Index r = begin; r < end; ++r) {
            for (int64_t g = 0; g < args.groups; ++g) {
              const A* from = dweights.data() + (g * s.kg + r) * s.og;
              T* to = grad_filter + r * args.o + g * s.og;
              for (int64_t o = 0; o < s.og; ++o) {
                to[o] = static_cast<T>(from[o]);
              }
            }
          }
        });
  }
};

#define DEFINE_CPU_SPEC(T)                        \
  template struct DeformableConv2d<CPUDevice, T>; \
  template struct DeformableConv2dGrad<CPUDevice, T>;
TFCO_CALL_FLOAT_TYPES(DEFINE_CPU_SPEC)
#undef DEFINE_CPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
