// GPU kernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients). Compiled by nvcc under --config=cuda; CI has no GPU, so they
// run on a GPU machine through tools/gpu_check.
//
// The backward pass adds into the feature gradient with atomics, so on GPU its
// summation order, and the last bits of the result, can vary between runs.

#if GOOGLE_CUDA

#define EIGEN_USE_GPU

#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/util/gpu_kernel_helper.h"
#include "tensorflow_customops/core/kernels/gpu_launch.cu.h"
#include "tensorflow_customops/core/kernels/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi_ops_gpu.cu.h"

namespace tensorflow {

typedef Eigen::GpuDevice GPUDevice;

namespace {

// Each thread computes the V outputs of a channel group (see
// DecodePooledGroup). At most 64 registers, so four blocks fit a
// multiprocessor: with the 95 the compiler picks unbounded, two did (a
// quarter of the threads an H100 holds), and gathers from the features could
// not hide their latency.
template <typename T, typename I, int V>
__global__ void __launch_bounds__(kGpuLoopThreads, 4)
    RoiAlignKernel(I groups, RoiAlignArgs args, const T* __restrict__ features,
                   const float* __restrict__ rois, T* __restrict__ pooled) {
  typedef typename roi::AccumulatorType<T>::type A;
  const I step = static_cast<I>(args.shape.out_channels / V);
  const I out_stride = step * static_cast<I>(args.pooled_layout.c_stride);
  for (I g : GpuGridRangeX<I>(groups)) {
    I first_output;
    const roi::PooledIndex idx = roi::DecodePooledGroup<V>(
        g, args.shape, args.pooled_layout, &first_output);
    const float* roi = rois + idx.k * 5;
    const roi::AlignBox<A> box = roi::BoxOf<A>(args, roi);
    int64_t cs, first;
    roi::BinChannels(args, idx.ph, idx.pw, &cs, &first);
    const I in_stride = step * static_cast<I>(cs);
    const T* channel =
        features +
        static_cast<int64_t>(roi[0]) * args.features_layout.n_stride + first +
        idx.c * cs;
    A acc[V] = {};
    for (int iy = 0; iy < box.grid_h; ++iy) {
      const A y =
          roi::SamplePoint(box.start_h, idx.ph, box.bin_h, iy, box.grid_h);
      for (int ix = 0; ix < box.grid_w; ++ix) {
        const A x =
            roi::SamplePoint(box.start_w, idx.pw, box.bin_w, ix, box.grid_w);
        const roi::BilinearSample<A, I> p = roi::Bilinear<A, I>(
            y, x, args.shape.height, args.shape.width, args.features_layout);
        if (!p.valid) continue;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const T* c = channel + j * in_stride;
          acc[j] += p.weight[0] * static_cast<A>(c[p.offset[0]]) +
                    p.weight[1] * static_cast<A>(c[p.offset[1]]) +
                    p.weight[2] * static_cast<A>(c[p.offset[2]]) +
                    p.weight[3] * static_cast<A>(c[p.offset[3]]);
        }
      }
    }
    const A count = roi::SampleCount(box);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      pooled[first_output + j * out_stride] = static_cast<T>(acc[j] / count);
    }
  }
}

template <typename T, typename I, int V>
__global__ void __launch_bounds__(kGpuLoopThreads, 4)
    RoiAlignGradKernel(I groups, RoiAlignArgs args, const T* __restrict__ grads,
                       const float* __restrict__ rois,
                       T* __restrict__ grad_features) {
  typedef typename roi::AccumulatorType<T>::type A;
  const I step = static_cast<I>(args.shape.out_channels / V);
  const I out_stride = step * static_cast<I>(args.pooled_layout.c_stride);
  for (I g : GpuGridRangeX<I>(groups)) {
    I first_output;
    const roi::PooledIndex idx = roi::DecodePooledGroup<V>(
        g, args.shape, args.pooled_layout, &first_output);
    const float* roi = rois + idx.k * 5;
    const roi::AlignBox<A> box = roi::BoxOf<A>(args, roi);
    int64_t cs, first;
    roi::BinChannels(args, idx.ph, idx.pw, &cs, &first);
    const I in_stride = step * static_cast<I>(cs);
    T* channel = grad_features +
                 static_cast<int64_t>(roi[0]) * args.features_layout.n_stride +
                 first + idx.c * cs;
    A grad[V];
    const A count = roi::SampleCount(box);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      grad[j] = static_cast<A>(grads[first_output + j * out_stride]) / count;
    }
    for (int iy = 0; iy < box.grid_h; ++iy) {
      const A y =
          roi::SamplePoint(box.start_h, idx.ph, box.bin_h, iy, box.grid_h);
      for (int ix = 0; ix < box.grid_w; ++ix) {
        const A x =
            roi::SamplePoint(box.start_w, idx.pw, box.bin_w, ix, box.grid_w);
        const roi::BilinearSample<A, I> p = roi::Bilinear<A, I>(
            y, x, args.shape.height, args.shape.width, args.features_layout);
        if (!p.valid) continue;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          T* c = channel + j * in_stride;
          for (int q = 0; q < 4; ++q) {
            GpuAtomicAdd(c + p.offset[q],
                         static_cast<T>(grad[j] * p.weight[q]));
          }
        }
      }
    }
  }
}

}  // namespace

namespace functor {

template <typename T>
struct RoiAlign<GPUDevice, T> {
  void operator()(const GPUDevice& d, const RoiAlignArgs& args,
                  const T* features, const float* rois, float* rois_scratch,
                  T* pooled) {
    roi::UploadRois(d, args.shape, rois, rois_scratch);
    const int64_t size = roi::PooledSize(args.shape);
    roi::WithChannelGroups(args, [&](auto index, auto channels) {
      typedef decltype(index) I;
      constexpr int V = decltype(channels)::value;
      const I groups = static_cast<I>(size / V);
      LaunchGpuLoop(RoiAlignKernel<T, I, V>, groups, d, groups, args, features,
                    rois_scratch, pooled);
    });
  }
};

template <typename T>
struct RoiAlignGrad<GPUDevice, T> {
  void operator()(const GPUDevice& d, const RoiAlignArgs& args, const T* grads,
                  const float* rois, float* rois_scratch, T* grad_features) {
    roi::UploadRois(d, args.shape, rois, rois_scratch);
    const roi::RoiShape& s = args.shape;
    d.memset(grad_features, 0,
             s.batch * s.height * s.width * s.channels * sizeof(T));
    const int64_t size = roi::PooledSize(s);
    if (size == 0) return;  // no boxes: the gradient is all zeros
    roi::WithChannelGroups(args, [&](auto index, auto channels) {
      typedef decltype(index) I;
      constexpr int V = decltype(channels)::value;
      const I groups = static_cast<I>(size / V);
      LaunchGpuLoop(RoiAlignGradKernel<T, I, V>, groups, d, groups, args, grads,
                    rois_scratch, grad_features);
    });
  }
};

#define DEFINE_GPU_SPEC(T)                \
  template struct RoiAlign<GPUDevice, T>; \
  template struct RoiAlignGrad<GPUDevice, T>;
TF_CALL_half(DEFINE_GPU_SPEC);
TF_CALL_bfloat16(DEFINE_GPU_SPEC);
TF_CALL_float(DEFINE_GPU_SPEC);
TF_CALL_double(DEFINE_GPU_SPEC);
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
