// GPU kernels of CustomOps>RoiPool and CustomOps>PsRoiPool (and their
// gradients). Compiled by nvcc under --config=cuda; CI has no GPU, so they
// run on a GPU machine through tools/gpu_check.
//
// The backward passes add into the feature gradient with atomics, so on GPU
// their summation order, and the last bits of the result, can vary between
// runs.

#if GOOGLE_CUDA

#include <cfloat>

#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"
#include "tensorflow_customops/core/kernels/roi/roi_gpu_index.cu.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

namespace tensorflow {
namespace customops {

namespace {

// Each thread pools the V channels of a channel group (DecodePooledGroup),
// which share the bin's bounds, its loops and its decoded index; each channel
// is still scanned in the same order as alone. I, the index type
// (WithIndexType), also holds the offsets within one image.
template <typename T, typename B, typename I, int V>
__global__ void RoiPoolKernel(I groups, roi::RoiArgs args,
                              const T* __restrict__ features,
                              const B* __restrict__ rois,
                              T* __restrict__ pooled,
                              int32_t* __restrict__ argmax) {
  typedef typename roi::AccumulatorType<T>::type A;
  const roi::Layout& in = args.features_layout;
  const I step = static_cast<I>(args.shape.out_channels / V);
  const I out_stride = step * static_cast<I>(args.pooled_layout.c_stride);
  const I in_stride = step * static_cast<I>(in.c_stride);
  const I h_stride = static_cast<I>(in.h_stride);
  const I w_stride = static_cast<I>(in.w_stride);
  const I width = static_cast<I>(args.shape.width);
  for (I g : GpuGridRangeX<I>(groups)) {
    I first;
    const roi::PooledIndex idx = roi::DecodePooledGroup<V>(g, args, &first);
    const B* roi = rois + idx.k * 5;
    roi::BinRange h, w;
    roi::PoolBins<A>(args, roi, idx.ph, idx.pw, &h, &w);
    const bool empty = h.end <= h.start || w.end <= w.start;
    A best[V];
    int32_t best_index[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      best[j] = empty ? A(0) : A(-FLT_MAX);
      best_index[j] = -1;
    }
    const T* channel = features + static_cast<int64_t>(roi[0]) * in.n_stride +
                       idx.c * in.c_stride;
    for (I y = static_cast<I>(h.start); y < static_cast<I>(h.end); ++y) {
      for (I x = static_cast<I>(w.start); x < static_cast<I>(w.end); ++x) {
        const I at = y * h_stride + x * w_stride;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A v = static_cast<A>(channel[at + j * in_stride]);
          if (v > best[j]) {
            best[j] = v;
            best_index[j] = static_cast<int32_t>(y * width + x);
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      pooled[first + j * out_stride] = static_cast<T>(best[j]);
      argmax[first + j * out_stride] = best_index[j];
    }
  }
}

// The V outputs of a channel group (as RoiPoolKernel's) add into their
// argmax pixels. Every layout has h_stride == width * w_stride, so pixel
// y * width + x sits at offset argmax * w_stride without dividing.
template <typename T, typename B, typename I, int V>
__global__ void RoiPoolGradKernel(I groups, roi::RoiArgs args,
                                  const T* __restrict__ grads,
                                  const B* __restrict__ rois,
                                  const int32_t* __restrict__ argmax,
                                  T* __restrict__ grad_features) {
  const roi::Layout& in = args.features_layout;
  const int32_t area =
      static_cast<int32_t>(args.shape.height * args.shape.width);
  const I step = static_cast<I>(args.shape.out_channels / V);
  const I out_stride = step * static_cast<I>(args.pooled_layout.c_stride);
  const I in_stride = step * static_cast<I>(in.c_stride);
  const I w_stride = static_cast<I>(in.w_stride);
  for (I g : GpuGridRangeX<I>(groups)) {
    I first;
    const roi::PooledIndex idx = roi::DecodePooledGroup<V>(g, args, &first);
    T* channel = grad_features +
                 static_cast<int64_t>(rois[idx.k * 5]) * in.n_stride +
                 idx.c * in.c_stride;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int32_t index = argmax[first + j * out_stride];
      // argmax was not validated on the host (it lives on the device): skip
      // anything that is not a pixel of the map.
      if (index < 0 || index >= area) continue;
      GpuAtomicAdd(channel + static_cast<I>(index) * w_stride + j * in_stride,
                   grads[first + j * out_stride]);
    }
  }
}

// The pixel ranges of the bin of PS pooled element i, and the offset in the
// features of its input channel's first pixel.
template <typename A, typename B, typename I>
__device__ inline int64_t PsBin(I i, const roi::RoiArgs& args,
                                const B* __restrict__ rois, roi::BinRange* h,
                                roi::BinRange* w) {
  const roi::PooledIndex idx =
      roi::DecodePooled(i, args, args.shape.out_channels);
  const B* roi = rois + idx.k * 5;
  roi::PoolBins<A>(args, roi, idx.ph, idx.pw, h, w);
  const roi::RoiAttrs& a = args.attrs;
  const int64_t c_in =
      roi::PsChannel(idx.c, idx.ph, idx.pw, a.pooled_height, a.pooled_width);
  return static_cast<int64_t>(roi[0]) * args.features_layout.n_stride +
         c_in * args.features_layout.c_stride;
}

template <typename T, typename B, typename I>
__global__ void PsRoiPoolKernel(I size, roi::RoiArgs args,
                                const T* __restrict__ features,
                                const B* __restrict__ rois,
                                T* __restrict__ pooled) {
  typedef typename roi::AccumulatorType<T>::type A;
  const roi::Layout& in = args.features_layout;
  for (I i : GpuGridRangeX<I>(size)) {
    roi::BinRange h, w;
    const T* channel = features + PsBin<A, B>(i, args, rois, &h, &w);
    A sum = 0;
    for (int64_t y = h.start; y < h.end; ++y) {
      for (int64_t x = w.start; x < w.end; ++x) {
        sum += static_cast<A>(channel[y * in.h_stride + x * in.w_stride]);
      }
    }
    const bool empty = h.end <= h.start || w.end <= w.start;
    pooled[i] = empty ? T(0)
                      : static_cast<T>(sum / static_cast<A>((h.end - h.start) *
                                                            (w.end - w.start)));
  }
}

template <typename T, typename B, typename I>
__global__ void PsRoiPoolGradKernel(I size, roi::RoiArgs args,
                                    const T* __restrict__ grads,
                                    const B* __restrict__ rois,
                                    T* __restrict__ grad_features) {
  typedef typename roi::AccumulatorType<T>::type A;
  const roi::Layout& in = args.features_layout;
  for (I i : GpuGridRangeX<I>(size)) {
    roi::BinRange h, w;
    T* channel = grad_features + PsBin<A, B>(i, args, rois, &h, &w);
    if (h.end <= h.start || w.end <= w.start) continue;
    const T g =
        static_cast<T>(static_cast<A>(grads[i]) /
                       static_cast<A>((h.end - h.start) * (w.end - w.start)));
    for (int64_t y = h.start; y < h.end; ++y) {
      for (int64_t x = w.start; x < w.end; ++x) {
        GpuAtomicAdd(channel + y * in.h_stride + x * in.w_stride, g);
      }
    }
  }
}

}  // namespace

namespace functor {

template <typename T, typename B>
struct RoiPool<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args,
                  const T* features, const B* rois, T* pooled,
                  int32_t* argmax) {
    const int64_t size = roi::PooledSize(args);
    roi::WithChannelGroups(args, [&](auto index, auto channels) {
      typedef decltype(index) I;
      constexpr int V = decltype(channels)::value;
      const I groups = static_cast<I>(size / V);
      LaunchGpuLoop(RoiPoolKernel<T, B, I, V>, groups, d, groups, args,
                    features, rois, pooled, argmax);
    });
  }
};

template <typename T, typename B>
struct RoiPoolGrad<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, const int32_t* argmax, T* grad_features) {
    roi::ZeroFeatures(d, args, grad_features);
    const int64_t size = roi::PooledSize(args);
    if (size == 0) return;  // no boxes: the gradient is all zeros
    roi::WithChannelGroups(args, [&](auto index, auto channels) {
      typedef decltype(index) I;
      constexpr int V = decltype(channels)::value;
      const I groups = static_cast<I>(size / V);
      LaunchGpuLoop(RoiPoolGradKernel<T, B, I, V>, groups, d, groups, args,
                    grads, rois, argmax, grad_features);
    });
  }
};

template <typename T, typename B>
struct PsRoiPool<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args,
                  const T* features, const B* rois, T* pooled) {
    const int64_t size = roi::PooledSize(args);
    roi::WithIndexType(size, args.features_layout, [&](auto index) {
      typedef decltype(index) I;
      LaunchGpuLoop(PsRoiPoolKernel<T, B, I>, size, d, static_cast<I>(size),
                    args, features, rois, pooled);
    });
  }
};

template <typename T, typename B>
struct PsRoiPoolGrad<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, T* grad_features) {
    roi::ZeroFeatures(d, args, grad_features);
    const int64_t size = roi::PooledSize(args);
    if (size == 0) return;  // no boxes: the gradient is all zeros
    roi::WithIndexType(size, args.features_layout, [&](auto index) {
      typedef decltype(index) I;
      LaunchGpuLoop(PsRoiPoolGradKernel<T, B, I>, size, d, static_cast<I>(size),
                    args, grads, rois, grad_features);
    });
  }
};

// Float boxes with every feature type, double boxes with double features
// (roi::BoxTypesOk).
#define DEFINE_GPU_SPEC_BOXES(T, B)             \
  template struct RoiPool<GPUDevice, T, B>;     \
  template struct RoiPoolGrad<GPUDevice, T, B>; \
  template struct PsRoiPool<GPUDevice, T, B>;   \
  template struct PsRoiPoolGrad<GPUDevice, T, B>;
#define DEFINE_GPU_SPEC(T) DEFINE_GPU_SPEC_BOXES(T, float)
TFCO_CALL_FLOAT_TYPES(DEFINE_GPU_SPEC)
DEFINE_GPU_SPEC_BOXES(double, double)
#undef DEFINE_GPU_SPEC
#undef DEFINE_GPU_SPEC_BOXES

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
