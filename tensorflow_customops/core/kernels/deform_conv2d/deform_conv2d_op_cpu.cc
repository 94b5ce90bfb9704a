// CPU kernels of CustomOps>DeformableConv2d and its gradient op, and the
// core's entry points for them.
//
// Both passes walk the output pixels of all images in blocks. A block's
// column buffer holds, per pixel, the C * kh * kw masked bilinear samples
// (im2col); a GEMM per group multiplies it with the filter. The backward
// pass rebuilds the columns, takes the filter gradient and the column
// gradient from two GEMMs, scatters the column gradient onto the input
// (col2im) and reduces it against the sampled corners for the offset and
// mask gradients.
//
// Determinism: blocks run in order, each element of a result is summed by
// one thread in an order fixed by the geometry alone, and the GEMMs sum in
// an order that does not depend on the thread count (matrix_mul_cpu_gemm.h,
// or Product's row loop), so the bits do not depend on the thread count.

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"
#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_cpu_gemm.h"
#include "tensorflow_customops/core/kernels/portable/cpu_simd.h"

namespace tensorflow {
namespace customops {
namespace {

// Scratch that grows with the block (columns, their gradient, the GEMMs'
// packed copies and the output block) is kept within this many bytes; a
// block is never smaller than one pixel.
constexpr int64_t kBlockScratchBytes = int64_t{64} << 20;
// Channels per unit of the input gradient's scatter.
constexpr int64_t kSegmentChannels = 64;

template <typename A>
using Buffer = std::vector<A, Eigen::aligned_allocator<A>>;

using deform_conv2d::Sample;
using deform_conv2d::Strides;

// The sizes every loop derives from the arguments.
struct Shape {
  explicit Shape(const TfcoDeformConv2dArgs& a)
      : args(a),
        taps(a.kh * a.kw),
        cg(a.c / a.groups),
        og(a.o / a.groups),
        kg(a.kh * a.kw * (a.c / a.groups)),
        cog(a.c / a.offset_groups),
        plane(a.ho * a.wo),
        pixels(a.n * a.ho * a.wo),
        input(deform_conv2d::InputStrides(a)) {}
  // (image, pixel, channel) strides of a map of `channels` channels over the
  // output pixels: offset, mask, output.
  Strides Map(int64_t channels) const {
    return deform_conv2d::MapStrides(args, channels);
  }

  const TfcoDeformConv2dArgs& args;
  int64_t taps, cg, og, kg, cog, plane, pixels;
  Strides input;
};

// A run of channels [c0, c1) within one offset group and one group, so that
// they share a sample position and a contiguous stretch of the columns.
struct Segment {
  int64_t c0, c1, offset_group, group;
};

std::vector<Segment> Segments(const Shape& s) {
  std::vector<Segment> segments;
  for (int64_t c0 = 0; c0 < s.args.c;) {
    const int64_t c1 =
        std::min({(c0 / s.cog + 1) * s.cog, (c0 / s.cg + 1) * s.cg,
                  c0 + kSegmentChannels});
    segments.push_back({c0, c1, c0 / s.cog, c0 / s.cg});
    c0 = c1;
  }
  return segments;
}

// out[c] = m * (sum of the valid corners' weight * value) for n channels of
// stride `stride` from `in`; torchvision's bilinear sum, in its order.
template <typename T, typename A>
TFCO_INLINE_INTO_CLONES void FillSamples(A* __restrict__ out,
                                         const T* __restrict__ in,
                                         const Sample<A>& s, A m,
                                         int64_t stride, int64_t n) {
  const T* v0 = in + s.offset[0];
  const T* v1 = in + s.offset[1];
  const T* v2 = in + s.offset[2];
  const T* v3 = in + s.offset[3];
  const A w0 = s.weight[0], w1 = s.weight[1], w2 = s.weight[2],
          w3 = s.weight[3];
  if (s.all_valid() && stride == 1) {
    for (int64_t c = 0; c < n; ++c) {
      out[c] = m * (w0 * static_cast<A>(v0[c]) + w1 * static_cast<A>(v1[c]) +
                    w2 * static_cast<A>(v2[c]) + w3 * static_cast<A>(v3[c]));
    }
    return;
  }
  for (int64_t c = 0; c < n; ++c) {
    out[c] = m * deform_conv2d::Bilinear<T, A>(s, in + c * stride);
  }
}

// out[c * stride] += g[c] * w for n channels.
template <typename A>
TFCO_INLINE_INTO_CLONES void Scatter(A* __restrict__ out,
                                     const A* __restrict__ g, A w,
                                     int64_t stride, int64_t n) {
  if (stride == 1) {
    for (int64_t c = 0; c < n; ++c) out[c] += g[c] * w;
    return;
  }
  for (int64_t c = 0; c < n; ++c) out[c * stride] += g[c] * w;
}

// For a sample whose four corners are on the map, over n channels of stride
// 1: sums[0], sums[1] += the slopes of each channel's bilinear sum along y
// and x (torchvision's coordinate weights) times g, sums[2] += its value
// times g. kLanes interleaved partial sums, added in a fixed order, let the
// loop vectorise; the order depends on n alone.
constexpr int kLanes = 16;
template <typename T, typename A>
TFCO_INLINE_INTO_CLONES void SlopeSums(const T* __restrict__ in,
                                       const Sample<A>& s,
                                       const A* __restrict__ g, int64_t n,
                                       A* sums) {
  const T* v0 = in + s.offset[0];
  const T* v1 = in + s.offset[1];
  const T* v2 = in + s.offset[2];
  const T* v3 = in + s.offset[3];
  const A ly = s.ly, lx = s.lx, hy = A(1) - s.ly, hx = A(1) - s.lx;
  const A w0 = s.weight[0], w1 = s.weight[1], w2 = s.weight[2],
          w3 = s.weight[3];
  A sy[kLanes] = {}, sx[kLanes] = {}, sm[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const A a0 = static_cast<A>(v0[c + l]), a1 = static_cast<A>(v1[c + l]);
      const A a2 = static_cast<A>(v2[c + l]), a3 = static_cast<A>(v3[c + l]);
      const A d = g[c + l];
      sy[l] += (lx * (a3 - a1) + hx * (a2 - a0)) * d;
      sx[l] += (ly * (a3 - a2) + hy * (a1 - a0)) * d;
      sm[l] += (w0 * a0 + w1 * a1 + w2 * a2 + w3 * a3) * d;
    }
  }
  for (; c < n; ++c) {
    const int l = static_cast<int>(c % kLanes);
    const A a0 = static_cast<A>(v0[c]), a1 = static_cast<A>(v1[c]);
    const A a2 = static_cast<A>(v2[c]), a3 = static_cast<A>(v3[c]);
    sy[l] += (lx * (a3 - a1) + hx * (a2 - a0)) * g[c];
    sx[l] += (ly * (a3 - a2) + hy * (a1 - a0)) * g[c];
    sm[l] += (w0 * a0 + w1 * a1 + w2 * a2 + w3 * a3) * g[c];
  }
  for (int l = 0; l < kLanes; ++l) {
    sums[0] += sy[l];
    sums[1] += sx[l];
    sums[2] += sm[l];
  }
}

// Overloads for float and double, preferred to the templates, which they
// inline once per clone (cpu_simd.h).
#define DEFINE_CLONED_LOOPS(T)                                                 \
  TFCO_SIMD_CLONES void FillSamples(                                           \
      A##T* __restrict__ out, const T* __restrict__ in, const Sample<A##T>& s, \
      A##T m, int64_t stride, int64_t n) {                                     \
    FillSamples<T, A##T>(out, in, s, m, stride, n);                            \
  }                                                                            \
  TFCO_SIMD_CLONES void Scatter(A##T* __restrict__ out,                        \
                                const A##T* __restrict__ g, A##T w,            \
                                int64_t stride, int64_t n) {                   \
    Scatter<A##T>(out, g, w, stride, n);                                       \
  }                                                                            \
  TFCO_SIMD_CLONES void SlopeSums(                                             \
      const T* __restrict__ in, const Sample<A##T>& s,                         \
      const A##T* __restrict__ g, int64_t n, A##T* sums) {                     \
    SlopeSums<T, A##T>(in, s, g, n, sums);                                     \
  }
typedef float Afloat;
typedef double Adouble;
DEFINE_CLONED_LOOPS(float)
DEFINE_CLONED_LOOPS(double)
#undef DEFINE_CLONED_LOOPS

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

// What the im2col, col2im and reduction loops share: the inputs, and the
// sample of tap k of offset group g at one output pixel.
template <typename T, typename A>
struct Sampler {
  const Shape& s;
  const T* input;
  const T* offset;
  const T* mask;
  Strides off, msk;

  Sampler(const Shape& shape, const T* input, const T* offset, const T* mask)
      : s(shape),
        input(input),
        offset(offset),
        mask(mask),
        off(shape.Map(2 * shape.args.offset_groups * shape.taps)),
        msk(shape.Map(shape.args.offset_groups * shape.taps)) {}

  // Image, row and column of global output pixel p.
  void Locate(int64_t p, int64_t* image, int64_t* pixel, int64_t* row,
              int64_t* col) const {
    *image = p / s.plane;
    *pixel = p % s.plane;
    *row = *pixel / s.args.wo;
    *col = *pixel % s.args.wo;
  }

  Sample<A> At(int64_t image, int64_t pixel, int64_t row, int64_t col,
               int64_t k, int64_t g, A* m) const {
    return deform_conv2d::SampleAt<T, A>(s.args, s.input, off, msk, offset,
                                         mask, image, pixel, row, col, k, g, m);
  }

  const T* Image(int64_t image, int64_t c0) const {
    return input + image * s.input.n + c0 * s.input.c;
  }
};

// The columns of pixels [p0, p0 + count): [groups][count][kh * kw * C /
// groups], tap-major within a group.
template <typename T, typename A>
void Im2Col(const CPUDevice& d, const Sampler<T, A>& sampler,
            const std::vector<Segment>& segments, int64_t p0, int64_t count,
            A* col) {
  const Shape& s = sampler.s;
  d.parallelFor(count,
                Eigen::TensorOpCost(4 * s.args.c * s.taps * sizeof(T),
                                    s.args.c * s.taps * sizeof(A),
                                    10.0 * s.args.c * s.taps),
                [&](Eigen::Index begin, Eigen::Index end) {
                  for (Eigen::Index local = begin; local < end; ++local) {
                    int64_t image, pixel, row, column;
                    sampler.Locate(p0 + local, &image, &pixel, &row, &column);
                    for (int64_t k = 0; k < s.taps; ++k) {
                      for (const Segment& seg : segments) {
                        A m;
                        const Sample<A> sample = sampler.At(
                            image, pixel, row, column, k, seg.offset_group, &m);
                        A* out = col + (seg.group * count + local) * s.kg +
                                 k * s.cg + (seg.c0 - seg.group * s.cg);
                        const int64_t n = seg.c1 - seg.c0;
                        if (sample.nan) {
                          std::fill(out, out + n,
                                    std::numeric_limits<A>::quiet_NaN());
                        } else if (!sample.inside) {
                          std::fill(out, out + n, m * A(0));
                        } else {
                          FillSamples(out, sampler.Image(image, seg.c0), sample,
                                      m, s.input.c, n);
                        }
                      }
                    }
                  }
                });
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

// Adds the column gradient of pixels [p0, p0 + count) onto the input
// gradient `grad` (input's layout, in A). Units are (image, segment): each
// input element is summed by one thread, pixel by pixel and tap by tap.
template <typename T, typename A>
void Col2Im(const CPUDevice& d, const Sampler<T, A>& sampler,
            const std::vector<Segment>& segments, int64_t p0, int64_t count,
            const A* dcol, A* grad) {
  const Shape& s = sampler.s;
  const int64_t first = p0 / s.plane, last = (p0 + count - 1) / s.plane;
  const int64_t units = (last - first + 1) * segments.size();
  d.parallelFor(
      units,
      Eigen::TensorOpCost(
          kSegmentChannels * s.taps * sizeof(A),
          kSegmentChannels * s.taps * sizeof(A),
          10.0 * kSegmentChannels * s.taps * std::min(count, s.plane)),
      [&](Eigen::Index begin, Eigen::Index end) {
        for (Eigen::Index unit = begin; unit < end; ++unit) {
          const int64_t image = first + unit / segments.size();
          const Segment& seg = segments[unit % segments.size()];
          const int64_t from = std::max(p0, image * s.plane);
          const int64_t to = std::min(p0 + count, (image + 1) * s.plane);
          A* g = grad + image * s.input.n + seg.c0 * s.input.c;
          const int64_t n = seg.c1 - seg.c0;
          for (int64_t p = from; p < to; ++p) {
            int64_t unused, pixel, row, column;
            sampler.Locate(p, &unused, &pixel, &row, &column);
            for (int64_t k = 0; k < s.taps; ++k) {
              A m;
              const Sample<A> sample = sampler.At(image, pixel, row, column, k,
                                                  seg.offset_group, &m);
              if (!sample.inside) continue;
              const A* dc = dcol + (seg.group * count + p - p0) * s.kg +
                            k * s.cg + (seg.c0 - seg.group * s.cg);
              for (int q = 0; q < 4; ++q) {
                // torchvision's col2im skips corners of weight 0.
                if (sample.valid[q] && sample.weight[q] > A(0)) {
                  Scatter(g + sample.offset[q], dc, m * sample.weight[q],
                          s.input.c, n);
                }
              }
            }
          }
        }
      });
}

// The offset and mask gradients of pixels [p0, p0 + count), each the sum
// over its offset group's channels, in order.
template <typename T, typename A>
void OffsetMaskGrad(const CPUDevice& d, const Sampler<T, A>& sampler,
                    const std::vector<Segment>& segments, int64_t p0,
                    int64_t count, const A* dcol, T* grad_offset,
                    T* grad_mask) {
  const Shape& s = sampler.s;
  const Strides off = sampler.off, msk = sampler.msk;
  d.parallelFor(
      count,
      Eigen::TensorOpCost(5 * s.args.c * s.taps * sizeof(T), 3 * s.taps,
                          16.0 * s.args.c * s.taps),
      [&](Eigen::Index begin, Eigen::Index end) {
        for (Eigen::Index local = begin; local < end; ++local) {
          int64_t image, pixel, row, column;
          sampler.Locate(p0 + local, &image, &pixel, &row, &column);
          T* go = grad_offset + image * off.n + pixel * off.y;
          T* gm = grad_mask == nullptr
                      ? nullptr
                      : grad_mask + image * msk.n + pixel * msk.y;
          for (int64_t g = 0; g < s.args.offset_groups; ++g) {
            for (int64_t k = 0; k < s.taps; ++k) {
              A m;
              const Sample<A> sample =
                  sampler.At(image, pixel, row, column, k, g, &m);
              A sum_y = 0, sum_x = 0, sum_m = 0;
              if (sample.nan) {
                sum_y = sum_x = sum_m = std::numeric_limits<A>::quiet_NaN();
              } else if (sample.near) {
                A sums[3] = {0, 0, 0};
                for (const Segment& seg : segments) {
                  if (seg.offset_group != g) continue;
                  const A* dc = dcol + (seg.group * count + local) * s.kg +
                                k * s.cg + (seg.c0 - seg.group * s.cg);
                  const T* in = sampler.Image(image, seg.c0);
                  if (sample.all_valid() && s.input.c == 1) {
                    SlopeSums(in, sample, dc, seg.c1 - seg.c0, sums);
                    continue;
                  }
                  for (int64_t c = 0; c < seg.c1 - seg.c0; ++c) {
                    const T* v = in + c * s.input.c;
                    const A v0 = sample.valid[0]
                                     ? static_cast<A>(v[sample.offset[0]])
                                     : A(0);
                    const A v1 = sample.valid[1]
                                     ? static_cast<A>(v[sample.offset[1]])
                                     : A(0);
                    const A v2 = sample.valid[2]
                                     ? static_cast<A>(v[sample.offset[2]])
                                     : A(0);
                    const A v3 = sample.valid[3]
                                     ? static_cast<A>(v[sample.offset[3]])
                                     : A(0);
                    // torchvision's coordinate weights: the slopes of the
                    // bilinear sum along y and x.
                    sums[0] += (sample.lx * (v3 - v1) +
                                (A(1) - sample.lx) * (v2 - v0)) *
                               dc[c];
                    sums[1] += (sample.ly * (v3 - v2) +
                                (A(1) - sample.ly) * (v1 - v0)) *
                               dc[c];
                    if (sample.inside) {
                      sums[2] +=
                          (sample.weight[0] * v0 + sample.weight[1] * v1 +
                           sample.weight[2] * v2 + sample.weight[3] * v3) *
                          dc[c];
                    }
                  }
                }
                sum_y = sums[0];
                sum_x = sums[1];
                sum_m = sums[2];
              }
              const int64_t tap = g * s.taps + k;
              go[2 * tap * off.c] = static_cast<T>(m * sum_y);
              go[(2 * tap + 1) * off.c] = static_cast<T>(m * sum_x);
              if (gm != nullptr) gm[tap * msk.c] = static_cast<T>(sum_m);
            }
          }
        }
      });
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

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

extern "C" TfcoError TfcoDeformableConv2d(const TfcoDevice* device,
                                          TfcoDtype dtype,
                                          const TfcoDeformConv2dArgs* args,
                                          const void* input, const void* filter,
                                          const void* offset, const void* mask,
                                          void* output) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunKernel<FloatTypes, FloatTypes>(
      "DeformableConv2d", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        functor::DeformableConv2d<std::decay_t<decltype(d)>, T>()(
            d, *args, static_cast<const T*>(input),
            static_cast<const T*>(filter), static_cast<const T*>(offset),
            static_cast<const T*>(mask), static_cast<T*>(output));
      });
}

extern "C" TfcoError TfcoDeformableConv2dGrad(
    const TfcoDevice* device, TfcoDtype dtype, const TfcoDeformConv2dArgs* args,
    const void* input, const void* filter, const void* offset, const void* mask,
    const void* grad_output, void* grad_input, void* grad_filter,
    void* grad_offset, void* grad_mask) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunKernel<FloatTypes, FloatTypes>(
      "DeformableConv2dGrad", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        functor::DeformableConv2dGrad<std::decay_t<decltype(d)>, T>()(
            d, *args, static_cast<const T*>(input),
            static_cast<const T*>(filter), static_cast<const T*>(offset),
            static_cast<const T*>(mask), static_cast<const T*>(grad_output),
            static_cast<T*>(grad_input), static_cast<T*>(grad_filter),
            static_cast<T*>(grad_offset), static_cast<T*>(grad_mask));
      });
}
