// CPU kernels of CustomOps>RoiPool (max) and CustomOps>PsRoiPool
// (position-sensitive average), which share the whole-pixel bin geometry, and
// of their gradients.

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/portable/cpu_simd.h"
#include "tensorflow_customops/core/kernels/roi/roi_cpu_loops.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

namespace tensorflow {
namespace customops {

namespace {

// Runs body(begin, end) on ranges of boxes in parallel: each box's outputs,
// which lie together in either layout, are written by one thread.
template <typename Body>
void ForBoxes(const CPUDevice& d, const roi::RoiArgs& args,
              int64_t cost_per_bin, const Body& body) {
  const int64_t cost = cost_per_bin * args.attrs.bins();
  d.parallelFor(args.shape.num_rois, Eigen::TensorOpCost(cost, cost, cost),
                body);
}

// For c < n, where pixel[c] > best[c]: best[c] = pixel[c] and
// best_index[c] = index. NaN is never greater, so NaNs are skipped. Written
// as selects with unconditional stores, which vectorise to a max and a masked
// blend; conditional stores would be masked stores, which the next pixel's
// loads of best could not forward from.
template <typename T, typename A>
TFCO_INLINE_INTO_CLONES void MaxPixel(A* __restrict__ best,
                                      int32_t* __restrict__ best_index,
                                      const T* __restrict__ pixel,
                                      int32_t index, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const A v = static_cast<A>(pixel[c]);
    const A b = best[c];
    const int32_t greater = -static_cast<int32_t>(v > b);
    best[c] = v > b ? v : b;
    best_index[c] ^= (best_index[c] ^ index) & greater;
  }
}

// Overloads for float and double, preferred to the template, which they
// inline once per clone (cpu_simd.h).
#define DEFINE_CLONED_LOOPS(T)                                 \
  TFCO_SIMD_CLONES void MaxPixel(                              \
      T* __restrict__ best, int32_t* __restrict__ best_index,  \
      const T* __restrict__ pixel, int32_t index, int64_t n) { \
    MaxPixel<T, T>(best, best_index, pixel, index, n);         \
  }
DEFINE_CLONED_LOOPS(float)
DEFINE_CLONED_LOOPS(double)
#undef DEFINE_CLONED_LOOPS

// Typical pixels per bin, for the cost model only.
int64_t PixelsPerBin(const roi::RoiArgs& args) {
  return std::max<int64_t>(
      1, args.shape.height * args.shape.width / (args.attrs.bins() * 4));
}

}  // namespace

namespace functor {

template <typename T, typename B>
struct RoiPool<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* features_in, const B* rois, T* pooled,
                  int32_t* argmax) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const roi::Layout& out = args.pooled_layout;
    std::vector<A> copy;
    const A* features =
        roi::AsAccumulator(d, features_in, s.batch * in.n_stride, &copy);
    ForBoxes(
        d, args, PixelsPerBin(args) * s.channels,
        [&](int64_t begin, int64_t end) {
          std::vector<A> best(s.channels);
          std::vector<T> pooled_scratch(out.n_stride);
          std::vector<int32_t> argmax_scratch(out.n_stride);
          for (int64_t k = begin; k < end; ++k) {
            const B* roi = rois + k * 5;
            const A* image =
                features + static_cast<int64_t>(roi[0]) * in.n_stride;
            T* box_pooled = roi::BoxOutput(out, pooled + k * out.n_stride,
                                           pooled_scratch.data());
            int32_t* box_argmax = roi::BoxOutput(out, argmax + k * out.n_stride,
                                                 argmax_scratch.data());
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                roi::BinRange h, w;
                roi::PoolBins<A>(args, roi, ph, pw, &h, &w);
                const bool empty = h.end <= h.start || w.end <= w.start;
                const int64_t bin = (ph * a.pooled_width + pw) * s.channels;
                int32_t* best_index = box_argmax + bin;
                // As torchvision: the running maximum starts at -FLT_MAX and
                // only a strictly greater value replaces it, so the first
                // maximum in (h, w) scan order wins and NaNs are skipped.
                std::fill(best.begin(), best.end(),
                          empty ? A(0) : A(-std::numeric_limits<float>::max()));
                std::fill(best_index, best_index + s.channels, -1);
                for (int64_t y = h.start; y < h.end; ++y) {
                  for (int64_t x = w.start; x < w.end; ++x) {
                    MaxPixel(best.data(), best_index,
                             image + y * in.h_stride + x * in.w_stride,
                             static_cast<int32_t>(y * s.width + x), s.channels);
                  }
                }
                for (int64_t c = 0; c < s.channels; ++c) {
                  box_pooled[bin + c] = static_cast<T>(best[c]);
                }
              }
            }
            roi::StoreBox(out, a.bins(), s.channels, box_pooled,
                          pooled + k * out.n_stride);
            roi::StoreBox(out, a.bins(), s.channels, box_argmax,
                          argmax + k * out.n_stride);
          }
        });
  }
};

template <typename T, typename B>
struct RoiPoolGrad<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, const int32_t* argmax, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const roi::Layout& out = args.pooled_layout;
    const roi::RoisByImage groups =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    // The smallest and largest pixel index in each row of bins' argmax (-1s
    // aside), so that bands skip rows of bins that add nothing to them.
    // argmax is an input, not necessarily the forward's, so its values may lie
    // outside their bins: the spans come from the values.
    std::vector<int32_t> span_lo(s.num_rois * a.pooled_height);
    std::vector<int32_t> span_hi(s.num_rois * a.pooled_height);
    d.parallelFor(
        s.num_rois,
        Eigen::TensorOpCost(out.n_stride * sizeof(int32_t), 0,
                            2 * out.n_stride),
        [&](int64_t begin, int64_t end) {
          for (int64_t k = begin; k < end; ++k) {
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              int32_t lo = std::numeric_limits<int32_t>::max(), hi = -1;
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                for (int64_t c = 0; c < s.channels; ++c) {
                  const int32_t index = argmax[out.Offset(k, ph, pw, c)];
                  // -1 (no contribution) never lowers lo below a pixel.
                  lo = std::min(lo, index < 0 ? lo : index);
                  hi = std::max(hi, index);
                }
              }
              span_lo[k * a.pooled_height + ph] = lo;
              span_hi[k * a.pooled_height + ph] = hi;
            }
          }
        });
    roi::ParallelBackward(
        d, args,
        std::max<int64_t>(1, s.num_rois * a.bins() * s.channels /
                                 std::max<int64_t>(s.batch * s.height, 1)),
        grad_features, [&](int64_t n, int64_t y_begin, int64_t y_end, A* band) {
          // argmax indices (y * width + x) in the band.
          const int32_t lo = static_cast<int32_t>(y_begin * s.width);
          const int32_t hi = static_cast<int32_t>(y_end * s.width);
          const int64_t channels = s.channels;
          const int64_t pixel_stride = in.w_stride;
          std::vector<A> g_row(a.pooled_width * channels);
          std::vector<int32_t> index_row(a.pooled_width * channels);
          A sink = 0;
          for (int64_t r = groups.begin[n]; r < groups.begin[n + 1]; ++r) {
            const int64_t k = groups.order[r];
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              if (span_hi[k * a.pooled_height + ph] < lo ||
                  span_lo[k * a.pooled_height + ph] >= hi) {
                continue;
              }
              roi::LoadBinRow(args.pooled_layout, k, ph, a.pooled_width,
                              channels, grads, g_row.data());
              roi::LoadBinRow(args.pooled_layout, k, ph, a.pooled_width,
                              channels, argmax, index_row.data());
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                const int32_t* index = index_row.data() + pw * channels;
                const A* g = g_row.data() + pw * channels;
                for (int64_t c = 0; c < channels; ++c) {
                  // Contributions off the band go to `sink`: a select, not a
                  // branch, which bins across the band's edge would
                  // mispredict. In NHWC, pixel index * w_stride is the
                  // pixel's offset.
                  const bool in_band = index[c] >= lo && index[c] < hi;
                  A* target = in_band
                                  ? band + (index[c] - lo) * pixel_stride + c
                                  : &sink;
                  *target += g[c];
                }
              }
            }
          }
        });
  }
};

template <typename T, typename B>
struct PsRoiPool<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* features_in, const B* rois, T* pooled) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const roi::Layout& out = args.pooled_layout;
    const int64_t groups = a.bins();
    std::vector<A> copy;
    const A* features =
        roi::AsAccumulator(d, features_in, s.batch * in.n_stride, &copy);
    ForBoxes(
        d, args, PixelsPerBin(args) * s.out_channels,
        [&](int64_t begin, int64_t end) {
          std::vector<A> sum(s.out_channels);
          std::vector<T> scratch(out.n_stride);
          for (int64_t k = begin; k < end; ++k) {
            const B* roi = rois + k * 5;
            T* box_out =
                roi::BoxOutput(out, pooled + k * out.n_stride, scratch.data());
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                roi::BinRange h, w;
                roi::PoolBins<A>(args, roi, ph, pw, &h, &w);
                std::fill(sum.begin(), sum.end(), A(0));
                const A* image =
                    features + static_cast<int64_t>(roi[0]) * in.n_stride +
                    roi::PsChannel(0, ph, pw, a.pooled_height, a.pooled_width) *
                        in.c_stride;
                for (int64_t y = h.start; y < h.end; ++y) {
                  for (int64_t x = w.start; x < w.end; ++x) {
                    const A* pixel = image + y * in.h_stride + x * in.w_stride;
                    for (int64_t c = 0; c < s.out_channels; ++c) {
                      sum[c] += pixel[c * groups * in.c_stride];
                    }
                  }
                }
                const bool empty = h.end <= h.start || w.end <= w.start;
                const A area =
                    static_cast<A>((h.end - h.start) * (w.end - w.start));
                T* bin_out =
                    box_out + (ph * a.pooled_width + pw) * s.out_channels;
                for (int64_t c = 0; c < s.out_channels; ++c) {
                  bin_out[c] = empty ? T(0) : static_cast<T>(sum[c] / area);
                }
              }
            }
            roi::StoreBox(out, a.bins(), s.out_channels, box_out,
                          pooled + k * out.n_stride);
          }
        });
  }
};

template <typename T, typename B>
struct PsRoiPoolGrad<CPUDevice, T, B> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const int64_t groups = a.bins();
    const roi::RoisByImage by_image =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    roi::ParallelBackward(
        d, args,
        std::max<int64_t>(1, s.num_rois * groups * PixelsPerBin(args) *
                                 s.out_channels /
                                 std::max<int64_t>(s.batch * s.height, 1)),
        grad_features, [&](int64_t n, int64_t y_begin, int64_t y_end, A* band) {
          std::vector<A> g_row(a.pooled_width * s.out_channels);
          for (int64_t r = by_image.begin[n]; r < by_image.begin[n + 1]; ++r) {
            const int64_t k = by_image.order[r];
            const B* roi = rois + k * 5;
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              const roi::BinRange h =
                  roi::PoolBin<A>(roi[2], roi[4], a.spatial_scale, ph,
                                  a.pooled_height, s.height, true);
              const int64_t y0 = std::max(h.start, y_begin);
              const int64_t y1 = std::min(h.end, y_end);
              if (y1 <= y0) continue;
              roi::LoadBinRow(args.pooled_layout, k, ph, a.pooled_width,
                              s.out_channels, grads, g_row.data());
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                const roi::BinRange w =
                    roi::PoolBin<A>(roi[1], roi[3], a.spatial_scale, pw,
                                    a.pooled_width, s.width, true);
                if (w.end <= w.start) continue;
                const A area =
                    static_cast<A>((h.end - h.start) * (w.end - w.start));
                A* g = g_row.data() + pw * s.out_channels;
                for (int64_t c = 0; c < s.out_channels; ++c) g[c] /= area;
                A* group = band + roi::PsChannel(0, ph, pw, a.pooled_height,
                                                 a.pooled_width) *
                                      in.c_stride;
                for (int64_t y = y0 - y_begin; y < y1 - y_begin; ++y) {
                  for (int64_t x = w.start; x < w.end; ++x) {
                    A* pixel = group + y * in.h_stride + x * in.w_stride;
                    for (int64_t c = 0; c < s.out_channels; ++c) {
                      pixel[c * groups * in.c_stride] += g[c];
                    }
                  }
                }
              }
            }
          }
        });
  }
};

#define DEFINE_CPU_SPEC(T, B)                   \
  template struct RoiPool<CPUDevice, T, B>;     \
  template struct RoiPoolGrad<CPUDevice, T, B>; \
  template struct PsRoiPool<CPUDevice, T, B>;   \
  template struct PsRoiPoolGrad<CPUDevice, T, B>;
TFCO_ROI_CALL_TYPES(DEFINE_CPU_SPEC)
#undef DEFINE_CPU_SPEC

}  // namespace functor

}  // namespace customops
}  // namespace tensorflow
