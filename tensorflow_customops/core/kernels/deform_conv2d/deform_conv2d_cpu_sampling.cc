// The loops that sample the input bilinearly; their channel loops are
// cloned per ISA (cpu_simd.h) and keep their bits on every CPU.

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_cpu_sampling.h"

#include <algorithm>
#include <limits>

#include "tensorflow_customops/core/kernels/portable/cpu_simd.h"

namespace tensorflow {
namespace customops {
namespace deform_conv2d_cpu {
namespace {

// Channels per unit of the input gradient's scatter.
constexpr int64_t kSegmentChannels = 64;

using deform_conv2d::Sample;
using deform_conv2d::Strides;

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

}  // namespace

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
using Acc = functor::DeformConvAccumulator<T>;
#define INSTANTIATE(T)                                                        \
  template void Im2Col(const CPUDevice&, const Sampler<T, Acc<T>>&,           \
                       const std::vector<Segment>&, int64_t, int64_t,         \
                       Acc<T>*);                                              \
  template void Col2Im(const CPUDevice&, const Sampler<T, Acc<T>>&,           \
                       const std::vector<Segment>&, int64_t, int64_t,         \
                       const Acc<T>*, Acc<T>*);                               \
  template void OffsetMaskGrad(const CPUDevice&, const Sampler<T, Acc<T>>&,   \
                               const std::vector<Segment>&, int64_t, int64_t, \
                               const Acc<T>*, T*, T*);
INSTANTIATE(Eigen::half)
INSTANTIATE(Eigen::bfloat16)
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace deform_conv2d_cpu
}  // namespace customops
}  // namespace tensorflow
