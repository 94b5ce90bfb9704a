// GPU kernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients). Compiled by nvcc under --config=cuda; CI has no GPU, so they
// run on a GPU machine through tools/gpu_check.
//
// The backward pass adds into the feature gradient with atomics, so on GPU its
// summation order, and the last bits of the result, can vary between runs.
// The box gradient does not: each box is one block's fixed-order reduction.

#if GOOGLE_CUDA

#include <algorithm>

#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"
#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_gpu_index.cu.h"
#include "tensorflow_customops/core/kernels/roi/roi_sampling.h"

namespace tensorflow {
namespace customops {

namespace {

// The V outputs of channel group g (see DecodePooledGroup): their bin, box,
// and where they and their first input channel start.
template <typename A, typename I, int V>
struct AlignGroup {
  roi::PooledIndex idx;
  roi::AlignBox<A> box;
  // Output j is at first_output + j * out_stride in the pooled tensor, and
  // its input channel starts at first_input + j * in_stride in the features.
  I first_output;
  I out_stride;
  int64_t first_input;
  I in_stride;
};

template <typename A, typename I, int V, typename B>
__device__ inline AlignGroup<A, I, V> DecodeAlignGroup(
    I g, const roi::RoiArgs& args, const B* __restrict__ rois) {
  AlignGroup<A, I, V> group;
  group.idx = roi::DecodePooledGroup<V>(g, args, &group.first_output);
  const B* roi = rois + group.idx.k * 5;
  group.box = roi::MakeAlignBox<A>(args.attrs, roi);
  int64_t cs, first;
  roi::BinChannels(args, group.idx.ph, group.idx.pw, &cs, &first);
  const I step = static_cast<I>(args.shape.out_channels / V);
  group.out_stride = step * static_cast<I>(args.pooled_layout.c_stride);
  group.in_stride = step * static_cast<I>(cs);
  group.first_input =
      static_cast<int64_t>(roi[0]) * args.features_layout.n_stride + first +
      group.idx.c * cs;
  return group;
}

// Each thread computes the V outputs of a channel group. At most 64
// registers, so four blocks fit a multiprocessor: with the 95 the compiler
// picks unbounded, two did (a quarter of the threads an H100 holds), and
// gathers from the features could not hide their latency.
template <typename T, typename B, typename I, int V>
__global__ void __launch_bounds__(kGpuLoopThreads, 4)
    RoiAlignKernel(I groups, roi::RoiArgs args, const T* __restrict__ features,
                   const B* __restrict__ rois, T* __restrict__ pooled) {
  typedef typename roi::AccumulatorType<T>::type A;
  for (I g : GpuGridRangeX<I>(groups)) {
    const AlignGroup<A, I, V> group = DecodeAlignGroup<A, I, V>(g, args, rois);
    const T* channel = features + group.first_input;
    A acc[V] = {};
    roi::ForEachSample<A, I>(
        args, group.box, group.idx.ph, group.idx.pw,
        [&](const roi::BilinearSample<A, I>& p) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const T* c = channel + j * group.in_stride;
            acc[j] += p.weight[0] * static_cast<A>(c[p.offset[0]]) +
                      p.weight[1] * static_cast<A>(c[p.offset[1]]) +
                      p.weight[2] * static_cast<A>(c[p.offset[2]]) +
                      p.weight[3] * static_cast<A>(c[p.offset[3]]);
          }
        });
    const A count = roi::SampleCount(group.box);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      pooled[group.first_output + j * group.out_stride] =
          static_cast<T>(acc[j] / count);
    }
  }
}

template <typename T, typename B, typename I, int V>
__global__ void __launch_bounds__(kGpuLoopThreads, 4)
    RoiAlignGradKernel(I groups, roi::RoiArgs args, const T* __restrict__ grads,
                       const B* __restrict__ rois,
                       T* __restrict__ grad_features) {
  typedef typename roi::AccumulatorType<T>::type A;
  for (I g : GpuGridRangeX<I>(groups)) {
    const AlignGroup<A, I, V> group = DecodeAlignGroup<A, I, V>(g, args, rois);
    T* channel = grad_features + group.first_input;
    const A count = roi::SampleCount(group.box);
    A grad[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      grad[j] =
          static_cast<A>(grads[group.first_output + j * group.out_stride]) /
          count;
    }
    roi::ForEachSample<A, I>(args, group.box, group.idx.ph, group.idx.pw,
                             [&](const roi::BilinearSample<A, I>& p) {
#pragma unroll
                               for (int j = 0; j < V; ++j) {
                                 T* c = channel + j * group.in_stride;
                                 for (int q = 0; q < 4; ++q) {
                                   GpuAtomicAdd(
                                       c + p.offset[q],
                                       static_cast<T>(grad[j] * p.weight[q]));
                                 }
                               }
                             });
  }
}

// Threads of a box gradient block, a power of two for its reduction.
constexpr int kBoxGradThreads = 256;

// Block b handles boxes b, b + gridDim.x, ...: its threads split the box's
// (bin, channel) pairs, each summing its pairs' samples' slopes times their
// motion into four partial coordinates, which the block then adds in a fixed
// tree, so the result does not depend on scheduling.
template <typename T, typename B>
__global__ void __launch_bounds__(kBoxGradThreads)
    RoiAlignGradBoxesKernel(roi::RoiArgs args, const T* __restrict__ grads,
                            const T* __restrict__ features,
                            const B* __restrict__ rois,
                            B* __restrict__ grad_rois) {
  typedef typename roi::AccumulatorType<T>::type A;
  __shared__ A partial[4][kBoxGradThreads];
  const roi::RoiAttrs& a = args.attrs;
  const int64_t channels = args.shape.out_channels;
  const int64_t pairs = a.bins() * channels;
  const A scale = static_cast<A>(a.spatial_scale);
  for (int64_t k = blockIdx.x; k < args.shape.num_rois; k += gridDim.x) {
    const B* roi = rois + k * 5;
    const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, roi);
    const A count = roi::SampleCount(box);
    const T* image =
        features + static_cast<int64_t>(roi[0]) * args.features_layout.n_stride;
    A sum[4] = {};  // x1, y1, x2, y2
    for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
      const int64_t c = i % channels;
      const int bin = static_cast<int>(i / channels);
      const int ph = bin / a.pooled_width, pw = bin % a.pooled_width;
      const A g =
          static_cast<A>(grads[args.pooled_layout.Offset(k, ph, pw, c)]) /
          count;
      int64_t cs, first;
      roi::BinChannels(args, ph, pw, &cs, &first);
      const T* channel = image + first + c * cs;
      roi::ForEachSampleAt<A>(
          args, box, ph, pw,
          [&](const roi::BilinearSample<A>& p, int iy, int ix) {
            A dy = 0, dx = 0;
            roi::AddSlopes(p, g, static_cast<A>(channel[p.offset[0]]),
                           static_cast<A>(channel[p.offset[1]]),
                           static_cast<A>(channel[p.offset[2]]),
                           static_cast<A>(channel[p.offset[3]]), &dy, &dx);
            const roi::AxisMotion<A> my = roi::SampleMotion(
                scale, box.floored_h, ph, iy, box.grid_h, a.pooled_height);
            const roi::AxisMotion<A> mx = roi::SampleMotion(
                scale, box.floored_w, pw, ix, box.grid_w, a.pooled_width);
            sum[0] += dx * mx.near;
            sum[1] += dy * my.near;
            sum[2] += dx * mx.far;
            sum[3] += dy * my.far;
          });
    }
    for (int j = 0; j < 4; ++j) partial[j][threadIdx.x] = sum[j];
    __syncthreads();
    for (int stride = kBoxGradThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) {
        for (int j = 0; j < 4; ++j) {
          partial[j][threadIdx.x] += partial[j][threadIdx.x + stride];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      B* out = grad_rois + k * 5;
      out[0] = 0;
      for (int j = 0; j < 4; ++j) out[j + 1] = static_cast<B>(partial[j][0]);
    }
    __syncthreads();
  }
}

// Row k of `checked`: box k of `rois`, or NullBox where it fails RoiOk.
template <typename B>
__global__ void CheckBoxesKernel(int64_t num_rois, int64_t batch,
                                 float spatial_scale,
                                 const B* __restrict__ rois,
                                 B* __restrict__ checked) {
  for (int64_t k : GpuGridRangeX<int64_t>(num_rois)) {
    const B* roi = rois + k * 5;
    B* out = checked + k * 5;
    if (roi::RoiOk(roi, batch, spatial_scale)) {
      for (int i = 0; i < 5; ++i) out[i] = roi[i];
    } else {
      roi::NullBox(spatial_scale, out);
    }
  }
}

}  // namespace

namespace functor {

template <typename T, typename B>
struct RoiAlign<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args,
                  const T* features, const B* rois, T* pooled) {
    const int64_t size = roi::PooledSize(args);
    roi::WithChannelGroups(args, [&](auto index, auto channels) {
      typedef decltype(index) I;
      constexpr int V = decltype(channels)::value;
      const I groups = static_cast<I>(size / V);
      LaunchGpuLoop(RoiAlignKernel<T, B, I, V>, groups, d, groups, args,
                    features, rois, pooled);
    });
  }
};

template <typename T, typename B>
struct RoiAlignGrad<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, T* grad_features) {
    roi::ZeroFeatures(d, args, grad_features);
    const int64_t size = roi::PooledSize(args);
    if (size == 0) return;  // no boxes: the gradient is all zeros
    roi::WithChannelGroups(args, [&](auto index, auto channels) {
      typedef decltype(index) I;
      constexpr int V = decltype(channels)::value;
      const I groups = static_cast<I>(size / V);
      LaunchGpuLoop(RoiAlignGradKernel<T, B, I, V>, groups, d, groups, args,
                    grads, rois, grad_features);
    });
  }
};

template <typename T, typename B>
struct RoiAlignGradBoxes<GPUDevice, T, B> {
  void operator()(const GPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const T* features, const B* rois, B* grad_rois) {
    // A block per box, up to what one launch may hold; blocks loop beyond.
    const int64_t blocks = std::min<int64_t>(args.shape.num_rois, 65535);
    LaunchGpuKernel(RoiAlignGradBoxesKernel<T, B>,
                    dim3(static_cast<unsigned>(blocks)), dim3(kBoxGradThreads),
                    d, args, grads, features, rois, grad_rois);
  }
};

// Float boxes with every feature type, double boxes with double features
// (roi::BoxTypesOk).
#define DEFINE_GPU_SPEC_BOXES(T, B)              \
  template struct RoiAlign<GPUDevice, T, B>;     \
  template struct RoiAlignGrad<GPUDevice, T, B>; \
  template struct RoiAlignGradBoxes<GPUDevice, T, B>;
#define DEFINE_GPU_SPEC(T) DEFINE_GPU_SPEC_BOXES(T, float)
TFCO_CALL_FLOAT_TYPES(DEFINE_GPU_SPEC)
DEFINE_GPU_SPEC_BOXES(double, double)
#undef DEFINE_GPU_SPEC
#undef DEFINE_GPU_SPEC_BOXES

template <typename B>
void CheckBoxesGpu(const GPUDevice& d, int64_t num_rois, int64_t batch,
                   float spatial_scale, const B* rois, B* checked) {
  if (num_rois == 0) return;
  LaunchGpuLoop(CheckBoxesKernel<B>, num_rois, d, num_rois, batch,
                spatial_scale, rois, checked);
}
template void CheckBoxesGpu(const GPUDevice&, int64_t, int64_t, float,
                            const float*, float*);
template void CheckBoxesGpu(const GPUDevice&, int64_t, int64_t, float,
                            const double*, double*);

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
