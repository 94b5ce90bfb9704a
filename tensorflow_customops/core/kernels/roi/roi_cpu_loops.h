// The portable kernels' helpers of the RoI kernels (roi_align_op, roi_pool_op):
// the CPU kernels' parallel loops, layout changes and buffers.
// Core sources only (TFCO_PORTABLE).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_CPU_LOOPS_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_CPU_LOOPS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/portable/device.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// The rois of batch image n are order[begin[n]] .. order[begin[n + 1] - 1],
// in increasing roi index: what a backward pass that shards over images needs
// to accumulate in a fixed order.
struct RoisByImage {
  std::vector<int64_t> order;
  std::vector<int64_t> begin;
};
template <typename B>
RoisByImage GroupRoisByImage(const B* rois, int64_t num_rois, int64_t batch);

// out[j * out_stride + i] = in[i * in_stride + j] for i < rows, j < cols, in
// tiles that stay in the L1 cache; converts S to D.
template <typename S, typename D>
void TransposeBlock(const S* in, int64_t rows, int64_t cols, int64_t in_stride,
                    D* out, int64_t out_stride) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(i0 + kTile, rows);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(j0 + kTile, cols);
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t i = i0; i < i1; ++i) {
          out[j * out_stride + i] = static_cast<D>(in[i * in_stride + j]);
        }
      }
    }
  }
}

// The CPU kernels' helpers, which run on the caller's thread pool.

// Runs a CPU backward pass deterministically and in parallel. Work item
// (image n, band of rows [y_begin, y_end)) calls
//   body(n, y_begin, y_end, A* band)
// which adds into `band`, the gradient's rows [y_begin, y_end) of image n in
// NHWC (element (y, x, c) at (y - y_begin) * h_stride + x * w_stride + c of
// args.features_layout, which must be NHWC), the contributions that land
// there. No two items write the same element, and each element sums its
// contributions in the order the body visits them, whatever the bands, so the
// result does not depend on the thread count. Bands are sized to stay in a
// core's L2 cache (about 512 KiB), with at least four items per thread. A
// float or double NHWC gradient is accumulated in place; otherwise (NCHW, as
// args.attrs.nchw says, or half and bfloat16, which accumulate in float) in a
// buffer per thread, whose band is then written to `grad_features` in its
// layout and type: no gradient-sized temporary, no second pass over it.
template <typename T, typename Body>
void ParallelBackward(const CPUDevice& d, const RoiArgs& args,
                      int64_t cost_per_row, T* grad_features,
                      const Body& body) {
  typedef typename AccumulatorType<T>::type A;
  const RoiShape& s = args.shape;
  const int64_t row = args.features_layout.h_stride;
  const int64_t image_size = s.height * row;
  const bool in_place = std::is_same<T, A>::value && !args.attrs.nchw;
  constexpr int64_t kBandBytes = 512 << 10;
  const int64_t wanted = (4 * std::max(d.numThreads(), 1) + s.batch - 1) /
                         std::max<int64_t>(s.batch, 1);
  const int64_t rows = std::max<int64_t>(
      1, std::min(kBandBytes / std::max<int64_t>(row * sizeof(A), 1),
                  (s.height + wanted - 1) / std::max<int64_t>(wanted, 1)));
  const int64_t bands = (s.height + rows - 1) / rows;
  d.parallelFor(
      s.batch * bands,
      Eigen::TensorOpCost(row * rows * sizeof(T), row * rows * sizeof(T),
                          cost_per_row * rows),
      [&](int64_t begin, int64_t end) {
        std::vector<A> buffer(in_place ? 0 : rows * row);
        for (int64_t item = begin; item < end; ++item) {
          const int64_t n = item / bands;
          const int64_t y_begin = item % bands * rows;
          const int64_t y_end = std::min(y_begin + rows, s.height);
          const int64_t size = (y_end - y_begin) * row;
          T* image = grad_features + n * image_size;
          A* band = in_place ? reinterpret_cast<A*>(image) + y_begin * row
                             : buffer.data();
          // Zeroed here rather than up front, so that in place each band's
          // pages are first touched by the thread that fills them.
          std::fill(band, band + size, A(0));
          body(n, y_begin, y_end, static_cast<A*>(band));
          if (in_place) continue;
          if (args.attrs.nchw) {
            // [pixels, channels] to the channel planes' rows.
            const int64_t plane = s.height * s.width;
            TransposeBlock(band, (y_end - y_begin) * s.width, s.channels,
                           s.channels, image + y_begin * s.width, plane);
          } else {
            T* out = image + y_begin * row;
            for (int64_t i = 0; i < size; ++i) out[i] = static_cast<T>(band[i]);
          }
        }
      });
}

// Where a box's pooled values are gathered bin by bin ([bins, channels]):
// straight into the pooled tensor `out` (the box's slice) in NHWC, in
// `scratch` (that size) in NCHW, whose StoreBox then writes them transposed,
// in the order of `out` in memory.
template <typename T>
T* BoxOutput(const Layout& layout, T* out, T* scratch) {
  return layout.c_stride == 1 ? out : scratch;
}
template <typename T>
void StoreBox(const Layout& layout, int64_t bins, int64_t channels,
              const T* box, T* out) {
  if (layout.c_stride == 1) return;
  TransposeBlock(box, bins, channels, channels, out, bins);
}

// row[pw * channels + c] = src at (k, ph, pw, c) of a pooled-shape tensor in
// `layout`, for the `width` bins of row ph: one row of bins, read in the order
// it lies in memory in either layout.
template <typename S, typename D>
void LoadBinRow(const Layout& layout, int64_t k, int ph, int width,
                int64_t channels, const S* src, D* row) {
  if (layout.c_stride == 1) {
    const S* in = src + layout.Offset(k, ph, 0, 0);
    for (int64_t i = 0; i < width * channels; ++i) {
      row[i] = static_cast<D>(in[i]);
    }
    return;
  }
  TransposeBlock(src + layout.Offset(k, ph, 0, 0), channels, width,
                 layout.c_stride, row, channels);
}

// Prefetches box k of a pooled-shape tensor in `layout` when that is NCHW,
// where LoadBinRow gathers a row of bins from every channel's plane: strided
// reads that wait on memory, which the hardware prefetcher does not run ahead
// of. Called for the next box a band will read.
template <typename S>
void PrefetchBox(const Layout& layout, int64_t k, const S* src) {
  if (layout.c_stride == 1) return;
  const char* begin = reinterpret_cast<const char*>(src + k * layout.n_stride);
  const char* end = begin + layout.n_stride * sizeof(S);
  for (const char* p = begin; p < end; p += 64) __builtin_prefetch(p);
}

// `data` (`size` elements) in the accumulation type: `data` itself for float
// and double; for half and bfloat16 a float copy, made in parallel into
// `copy`. Float holds every half and bfloat16 value exactly, so a kernel
// reading the copy computes what it would reading `data`, in the float loops,
// which are the vectorised ones (cpu_simd.h), and converts each value once
// instead of at every read.
template <typename T>
const typename AccumulatorType<T>::type* AsAccumulator(
    const CPUDevice& d, const T* data, int64_t size,
    std::vector<typename AccumulatorType<T>::type>* copy) {
  typedef typename AccumulatorType<T>::type A;
  if constexpr (std::is_same<T, A>::value) {
    return data;
  } else {
    copy->resize(size);
    A* out = copy->data();
    d.parallelFor(size, Eigen::TensorOpCost(sizeof(T), sizeof(A), 4),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                      out[i] = static_cast<A>(data[i]);
                    }
                  });
    return out;
  }
}

// `args` with the feature map in NHWC.
inline RoiArgs ChannelsLast(RoiArgs args) {
  args.features_layout = Layout::Make(false, args.shape.height,
                                      args.shape.width, args.shape.channels);
  return args;
}

// NCHW [batch, C, H * W] `in` as [batch, H * W, C] in `out`, in parallel
// over tiles of each image.
template <typename T>
void ChannelsLastCopy(const CPUDevice& d, const T* in, int64_t batch,
                      int64_t channels, int64_t pixels, T* out) {
  constexpr int64_t kTile = 32;
  const int64_t channel_tiles = (channels + kTile - 1) / kTile;
  const int64_t pixel_tiles = (pixels + kTile - 1) / kTile;
  d.parallelFor(batch * channel_tiles * pixel_tiles,
                Eigen::TensorOpCost(kTile * kTile * sizeof(T),
                                    kTile * kTile * sizeof(T), kTile * kTile),
                [&](int64_t begin, int64_t end) {
                  for (int64_t tile = begin; tile < end; ++tile) {
                    const int64_t n = tile / (channel_tiles * pixel_tiles);
                    const int64_t c0 =
                        tile / pixel_tiles % channel_tiles * kTile;
                    const int64_t p0 = tile % pixel_tiles * kTile;
                    const int64_t offset = n * channels * pixels;
                    TransposeBlock(in + offset + c0 * pixels + p0,
                                   std::min(kTile, channels - c0),
                                   std::min(kTile, pixels - p0), pixels,
                                   out + offset + p0 * channels + c0, channels);
                  }
                });
}

// NCHW kernels on CPU run with their feature map in NHWC, where channels are
// contiguous and the loops vectorise; pooled tensors keep their layout. Every
// element sees the same arithmetic in the same order, so the bits do not
// change. The forward, run(const RoiArgs& args, const T* features) here,
// reads an NHWC copy of `features`; the backward writes NHWC bands into the
// NCHW gradient (ParallelBackward), so it runs with BackwardArgs. On GPU both
// get the tensors as they are.
template <typename T, typename Run>
void ReadFeaturesChannelsLast(const CPUDevice& d, const RoiArgs& args,
                              const T* features, const Run& run) {
  if (!args.attrs.nchw) {
    run(args, features);
    return;
  }
  const RoiShape& s = args.shape;
  const int64_t size = s.batch * s.channels * s.height * s.width;
  // Uninitialised (every element is written) and aligned as TensorFlow's
  // buffers are.
  std::unique_ptr<T, void (*)(void*)> copy(
      static_cast<T*>(Eigen::internal::aligned_malloc(size * sizeof(T))),
      Eigen::internal::aligned_free);
  ChannelsLastCopy(d, features, s.batch, s.channels, s.height * s.width,
                   copy.get());
  run(ChannelsLast(args), static_cast<const T*>(copy.get()));
}
template <typename T, typename Run>
void ReadFeaturesChannelsLast(const GPUDevice&, const RoiArgs& args,
                              const T* features, const Run& run) {
  run(args, features);
}

inline RoiArgs BackwardArgs(const CPUDevice&, const RoiArgs& args) {
  return ChannelsLast(args);
}
inline RoiArgs BackwardArgs(const GPUDevice&, const RoiArgs& args) {
  return args;
}

// The name of a kernel of `kind` in error messages.
inline const char* KindName(RoiKind kind) {
  switch (kind) {
    case RoiKind::kPool:
      return "RoiPool";
    case RoiKind::kAlign:
      return "RoiAlign";
    case RoiKind::kPsPool:
      return "PsRoiPool";
    case RoiKind::kPsAlign:
      return "PsRoiAlign";
  }
  return "RoI";
}

// Calls m(T, B) for every pair of feature and box types BoxTypesOk accepts,
// those RunRoiKernel dispatches to: the types to instantiate functors for.
#define TFCO_ROI_CALL_TYPES(m)                                    \
  m(Eigen::half, float) m(Eigen::bfloat16, float) m(float, float) \
      m(double, float) m(double, double)

// The entry points' dispatch: RunKernel of Entry::Run<Device, T, B>(d, args,
// pointers...) for features of `dtype` (T) and boxes of `boxes_dtype` (B), a
// pair BoxTypesOk accepts; its errors name args' kind.
template <typename Entry, typename... Pointers>
TfcoError RunRoiKernel(const TfcoDevice* device, TfcoDtype dtype,
                       TfcoDtype boxes_dtype, const RoiArgs& args,
                       Pointers... pointers) {
  const char* op = KindName(args.attrs.kind);
  auto kernel = [&](const auto& d, auto t, auto b) {
    Entry::template Run<std::decay_t<decltype(d)>, decltype(t), decltype(b)>(
        d, args, pointers...);
  };
  if (!BoxTypesOk(dtype, boxes_dtype)) {
    ClearError();
    RecordError(std::string(op) + ": no kernel for features of element type " +
                std::to_string(static_cast<int>(dtype)) +
                " with boxes of element type " +
                std::to_string(static_cast<int>(boxes_dtype)));
    return CurrentError();
  }
  if (boxes_dtype == TFCO_DOUBLE) {
    return RunKernel<TypeList<double>, TypeList<double>>(
        op, device, dtype,
        [&](const auto& d, auto t) { kernel(d, t, double()); });
  }
  return RunKernel<FloatTypes, FloatTypes>(
      op, device, dtype, [&](const auto& d, auto t) { kernel(d, t, float()); });
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_CPU_LOOPS_H_
