// CPU kernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients), which share one functor.

#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/portable/cpu_simd.h"
#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_cpu_loops.h"
#include "tensorflow_customops/core/kernels/roi/roi_sampling.h"

namespace tensorflow {
namespace customops {

namespace {

// acc[c] += sum_j weight[j] * corner_j[c * stride] for c < n. The stride-1
// case (RoiAlign) is a separate loop so the compiler vectorises it; both do
// the same operations in the same order, so they give the same bits.
template <typename T, typename A>
TFCO_INLINE_INTO_CLONES void AddSample(
    A* __restrict__ acc, const T* __restrict__ v0, const T* __restrict__ v1,
    const T* __restrict__ v2, const T* __restrict__ v3, const A* weight,
    int64_t stride, int64_t n) {
  const A w0 = weight[0], w1 = weight[1], w2 = weight[2], w3 = weight[3];
  if (stride == 1) {
    for (int64_t c = 0; c < n; ++c) {
      acc[c] += w0 * static_cast<A>(v0[c]) + w1 * static_cast<A>(v1[c]) +
                w2 * static_cast<A>(v2[c]) + w3 * static_cast<A>(v3[c]);
    }
    return;
  }
  for (int64_t c = 0; c < n; ++c) {
    const int64_t o = c * stride;
    acc[c] += w0 * static_cast<A>(v0[o]) + w1 * static_cast<A>(v1[o]) +
              w2 * static_cast<A>(v2[o]) + w3 * static_cast<A>(v3[o]);
  }
}

// out[c * stride] += g[c] * w for c < n; stride 1 vectorises (see AddSample).
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

// Adds sum_c g[c] * d(value_c)/dy and /dx of sample p over n channels (corner
// c at v_j[c * stride]) to *dy and *dx, channel by channel in order.
template <typename A>
void AddSampleSlopes(const roi::BilinearSample<A>& p, const A* base, const A* g,
                     int64_t stride, int64_t n, A* dy, A* dx) {
  const A* v0 = base + p.offset[0];
  const A* v1 = base + p.offset[1];
  const A* v2 = base + p.offset[2];
  const A* v3 = base + p.offset[3];
  for (int64_t c = 0; c < n; ++c) {
    const int64_t o = c * stride;
    roi::AddSlopes(p, g[c], v0[o], v1[o], v2[o], v3[o], dy, dx);
  }
}

// Overloads for float and double, preferred to the templates, which they
// inline once per clone (cpu_simd.h).
#define DEFINE_CLONED_LOOPS(T)                                                 \
  TFCO_SIMD_CLONES void AddSample(                                             \
      T* __restrict__ acc, const T* __restrict__ v0, const T* __restrict__ v1, \
      const T* __restrict__ v2, const T* __restrict__ v3, const T* weight,     \
      int64_t stride, int64_t n) {                                             \
    AddSample<T, T>(acc, v0, v1, v2, v3, weight, stride, n);                   \
  }                                                                            \
  TFCO_SIMD_CLONES void Scatter(T* __restrict__ out, const T* __restrict__ g,  \
                                T w, int64_t stride, int64_t n) {              \
    Scatter<T>(out, g, w, stride, n);                                          \
  }
DEFINE_CLONED_LOOPS(float)
DEFINE_CLONED_LOOPS(double)
#undef DEFINE_CLONED_LOOPS

}  // namespace

namespace functor {

template <typename T, typename B>
struct RoiAlign<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* features_in, const B* rois, T* pooled) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const int64_t channels = s.out_channels;
    std::vector<A> copy;
    const A* features = roi::AsAccumulator(
        d, features_in, s.batch * args.features_layout.n_stride, &copy);
    // One work item is one box with all its bins and channels: each bilinear
    // weight is computed once per sample and applied to every channel. The
    // box's outputs are gathered bin by bin and written in one go, in the
    // order they lie in memory in either layout.
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<A> acc(channels);
      std::vector<T> scratch(a.bins() * channels);
      for (int64_t k = begin; k < end; ++k) {
        T* out = pooled + k * args.pooled_layout.n_stride;
        const B* roi = rois + k * 5;
        const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, roi);
        if (roi::MissesMap(args, box)) {
          // The bins' sums stay 0; written at once, as rows moved off the
          // map (multi_scale_roi_align under XLA) are common.
          std::fill(out, out + args.pooled_layout.n_stride, T(0));
          continue;
        }
        T* box_out = roi::BoxOutput(args.pooled_layout, out, scratch.data());
        const A* image = features + static_cast<int64_t>(roi[0]) *
                                        args.features_layout.n_stride;
        const A count = roi::SampleCount(box);
        for (int ph = 0; ph < a.pooled_height; ++ph) {
          for (int pw = 0; pw < a.pooled_width; ++pw) {
            int64_t cs, first;
            roi::BinChannels(args, ph, pw, &cs, &first);
            const A* base = image + first;
            std::fill(acc.begin(), acc.end(), A(0));
            roi::ForEachSample(
                args, box, ph, pw, [&](const roi::BilinearSample<A>& p) {
                  AddSample(acc.data(), base + p.offset[0], base + p.offset[1],
                            base + p.offset[2], base + p.offset[3], p.weight,
                            cs, channels);
                });
            T* bin_out = box_out + (ph * a.pooled_width + pw) * channels;
            for (int64_t c = 0; c < channels; ++c) {
              bin_out[c] = static_cast<T>(acc[c] / count);
            }
          }
        }
        roi::StoreBox(args.pooled_layout, a.bins(), channels, box_out, out);
      }
    };
    const int64_t samples =
        a.bins() *
        (a.sampling_ratio > 0 ? a.sampling_ratio * a.sampling_ratio : 4);
    d.parallelFor(s.num_rois,
                  Eigen::TensorOpCost(samples * channels * 4 * sizeof(T),
                                      a.bins() * channels * sizeof(T),
                                      samples * channels * 10),
                  work);
  }
};

template <typename T, typename B>
struct RoiAlignGrad<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* grads_in, const B* rois, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    std::vector<A> copy;
    const A* grads = roi::AsAccumulator(
        d, grads_in, s.num_rois * args.pooled_layout.n_stride, &copy);
    const roi::Layout& in = args.features_layout;
    const roi::RoisByImage groups =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    const int64_t channels = s.out_channels;
    const int64_t samples =
        a.sampling_ratio > 0 ? a.sampling_ratio * a.sampling_ratio : 4;
    // Contributions per row of the map: a box's samples spread over about a
    // third of its image's rows.
    const int64_t cost =
        std::max<int64_t>(1, s.num_rois * a.bins() * samples * 4 * channels /
                                 std::max<int64_t>(s.batch * s.height, 1));
    roi::ParallelBackward(
        d, args, cost, grad_features,
        [&](int64_t n, int64_t y_begin, int64_t y_end, A* band) {
          // Corner offsets (y * h_stride + x * w_stride) in the band.
          const int64_t lo = y_begin * in.h_stride, hi = y_end * in.h_stride;
          // A sample at y touches rows within one row of max(y, 0) (the map
          // clamps y below 0). Whether samples from y0 to y1 can reach the
          // band; boxes may be reversed, so either end can be lower.
          auto reaches_band = [&](A y0, A y1) {
            const A y_min = std::min(y0, y1);
            const A y_max = std::max(std::max(y0, y1), A(0));
            return y_max + A(1) >= A(y_begin) && y_min - A(1) < A(y_end);
          };
          // The boxes of image n whose samples can reach the band, in order.
          std::vector<int64_t> boxes;
          for (int64_t r = groups.begin[n]; r < groups.begin[n + 1]; ++r) {
            const int64_t k = groups.order[r];
            const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, rois + k * 5);
            if (roi::MissesMap(args, box)) continue;
            if (reaches_band(
                    roi::SamplePoint(box.start_h, 0, box.bin_h, 0, box.grid_h),
                    roi::SamplePoint(box.start_h, a.pooled_height - 1,
                                     box.bin_h, box.grid_h - 1, box.grid_h))) {
              boxes.push_back(k);
            }
          }
          // The incoming gradient of one row of bins, over count.
          std::vector<A> g_row(a.pooled_width * channels);
          for (size_t i = 0; i < boxes.size(); ++i) {
            const int64_t k = boxes[i];
            if (i + 1 < boxes.size()) {
              roi::PrefetchBox(args.pooled_layout, boxes[i + 1], grads);
            }
            const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, rois + k * 5);
            const A count = roi::SampleCount(box);
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              // Bin rows that miss the band are skipped.
              if (!reaches_band(roi::SamplePoint(box.start_h, ph, box.bin_h, 0,
                                                 box.grid_h),
                                roi::SamplePoint(box.start_h, ph, box.bin_h,
                                                 box.grid_h - 1, box.grid_h))) {
                continue;
              }
              roi::LoadBinRow(args.pooled_layout, k, ph, a.pooled_width,
                              channels, grads, g_row.data());
              for (A& g : g_row) g /= count;
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                const A* g = g_row.data() + pw * channels;
                int64_t cs, first;
                roi::BinChannels(args, ph, pw, &cs, &first);
                // Offset of channel `first` at the band's first element.
                const int64_t base = first - lo;
                roi::ForEachSample(
                    args, box, ph, pw, [&](const roi::BilinearSample<A>& p) {
                      for (int j = 0; j < 4; ++j) {
                        if (p.offset[j] >= lo && p.offset[j] < hi) {
                          Scatter(band + (base + p.offset[j]), g, p.weight[j],
                                  cs, channels);
                        }
                      }
                    });
              }
            }
          }
        });
  }
};

template <typename T, typename B>
struct RoiAlignGradBoxes<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* grads_in, const T* features_in, const B* rois,
                  B* grad_rois) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const int64_t channels = s.out_channels;
    std::vector<A> copy;
    const A* features = roi::AsAccumulator(
        d, features_in, s.batch * args.features_layout.n_stride, &copy);
    const A scale = static_cast<A>(a.spatial_scale);
    // One work item is one box: its four coordinates' sums run in a fixed
    // order whatever the thread count.
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<A> g_row(a.pooled_width * channels);
      for (int64_t k = begin; k < end; ++k) {
        const B* roi = rois + k * 5;
        const A* image = features + static_cast<int64_t>(roi[0]) *
                                        args.features_layout.n_stride;
        const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, roi);
        const A count = roi::SampleCount(box);
        A x1 = 0, y1 = 0, x2 = 0, y2 = 0;
        // A box that misses the map has no samples: its sums stay 0.
        const int rows = roi::MissesMap(args, box) ? 0 : a.pooled_height;
        for (int ph = 0; ph < rows; ++ph) {
          roi::LoadBinRow(args.pooled_layout, k, ph, a.pooled_width, channels,
                          grads_in, g_row.data());
          for (A& g : g_row) g /= count;
          for (int pw = 0; pw < a.pooled_width; ++pw) {
            int64_t cs, first;
            roi::BinChannels(args, ph, pw, &cs, &first);
            const A* g = g_row.data() + pw * channels;
            roi::ForEachSampleAt(
                args, box, ph, pw,
                [&](const roi::BilinearSample<A>& p, int iy, int ix) {
                  A dy = 0, dx = 0;
                  AddSampleSlopes(p, image + first, g, cs, channels, &dy, &dx);
                  const roi::AxisMotion<A> my =
                      roi::SampleMotion(scale, box.floored_h, ph, iy,
                                        box.grid_h, a.pooled_height);
                  const roi::AxisMotion<A> mx = roi::SampleMotion(
                      scale, box.floored_w, pw, ix, box.grid_w, a.pooled_width);
                  y1 += dy * my.near;
                  y2 += dy * my.far;
                  x1 += dx * mx.near;
                  x2 += dx * mx.far;
                });
          }
        }
        B* out = grad_rois + k * 5;
        out[0] = 0;
        out[1] = static_cast<B>(x1);
        out[2] = static_cast<B>(y1);
        out[3] = static_cast<B>(x2);
        out[4] = static_cast<B>(y2);
      }
    };
    const int64_t samples =
        a.bins() *
        (a.sampling_ratio > 0 ? a.sampling_ratio * a.sampling_ratio : 4);
    d.parallelFor(s.num_rois,
                  Eigen::TensorOpCost(samples * channels * 5 * sizeof(A),
                                      5 * sizeof(B), samples * channels * 12),
                  work);
  }
};

#define DEFINE_CPU_SPEC(T, B)                    \
  template struct RoiAlign<CPUDevice, T, B>;     \
  template struct RoiAlignGrad<CPUDevice, T, B>; \
  template struct RoiAlignGradBoxes<CPUDevice, T, B>;
TFCO_ROI_CALL_TYPES(DEFINE_CPU_SPEC)
#undef DEFINE_CPU_SPEC

}  // namespace functor

}  // namespace customops
}  // namespace tensorflow
