// GPU kernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients). Compiled by nvcc under --config=cuda; never run in this
// project's CI, which has no GPU.
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

template <typename T>
__global__ void RoiAlignKernel(int64_t size, RoiAlignArgs args,
                               const T* __restrict__ features,
                               const float* __restrict__ rois,
                               T* __restrict__ pooled) {
  typedef typename roi::AccumulatorType<T>::type A;
  for (int64_t i : GpuGridRangeX<int64_t>(size)) {
    const roi::PooledIndex idx =
        roi::DecodePooled(i, args.shape, args.pooled_layout);
    const float* roi = rois + idx.k * 5;
    const roi::AlignBox<A> box = roi::BoxOf<A>(args, roi);
    int64_t cs, first;
    roi::BinChannels(args, idx.ph, idx.pw, &cs, &first);
    const T* channel =
        features +
        static_cast<int64_t>(roi[0]) * args.features_layout.n_stride + first +
        idx.c * cs;
    A acc = 0;
    for (int iy = 0; iy < box.grid_h; ++iy) {
      const A y =
          roi::SamplePoint(box.start_h, idx.ph, box.bin_h, iy, box.grid_h);
      for (int ix = 0; ix < box.grid_w; ++ix) {
        const A x =
            roi::SamplePoint(box.start_w, idx.pw, box.bin_w, ix, box.grid_w);
        const roi::BilinearSample<A> p = roi::Bilinear<A>(
            y, x, args.shape.height, args.shape.width, args.features_layout);
        if (!p.valid) continue;
        acc += p.weight[0] * static_cast<A>(channel[p.offset[0]]) +
               p.weight[1] * static_cast<A>(channel[p.offset[1]]) +
               p.weight[2] * static_cast<A>(channel[p.offset[2]]) +
               p.weight[3] * static_cast<A>(channel[p.offset[3]]);
      }
    }
    pooled[i] = static_cast<T>(acc / roi::SampleCount(box));
  }
}

template <typename T>
__global__ void RoiAlignGradKernel(int64_t size, RoiAlignArgs args,
                                   const T* __restrict__ grads,
                                   const float* __restrict__ rois,
                                   T* __restrict__ grad_features) {
  typedef typename roi::AccumulatorType<T>::type A;
  for (int64_t i : GpuGridRangeX<int64_t>(size)) {
    const roi::PooledIndex idx =
        roi::DecodePooled(i, args.shape, args.pooled_layout);
    const float* roi = rois + idx.k * 5;
    const roi::AlignBox<A> box = roi::BoxOf<A>(args, roi);
    int64_t cs, first;
    roi::BinChannels(args, idx.ph, idx.pw, &cs, &first);
    T* channel = grad_features +
                 static_cast<int64_t>(roi[0]) * args.features_layout.n_stride +
                 first + idx.c * cs;
    const A g = static_cast<A>(grads[i]) / roi::SampleCount(box);
    for (int iy = 0; iy < box.grid_h; ++iy) {
      const A y =
          roi::SamplePoint(box.start_h, idx.ph, box.bin_h, iy, box.grid_h);
      for (int ix = 0; ix < box.grid_w; ++ix) {
        const A x =
            roi::SamplePoint(box.start_w, idx.pw, box.bin_w, ix, box.grid_w);
        const roi::BilinearSample<A> p = roi::Bilinear<A>(
            y, x, args.shape.height, args.shape.width, args.features_layout);
        if (!p.valid) continue;
        for (int j = 0; j < 4; ++j) {
          GpuAtomicAdd(channel + p.offset[j], static_cast<T>(g * p.weight[j]));
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
    GpuLaunchConfig config = GetGpuLaunchConfig64(size, d);
    TF_CHECK_OK(GpuLaunchKernel(RoiAlignKernel<T>, config.block_count,
                                config.thread_per_block, 0, d.stream(), size,
                                args, features, rois_scratch, pooled));
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
    GpuLaunchConfig config = GetGpuLaunchConfig64(size, d);
    TF_CHECK_OK(GpuLaunchKernel(RoiAlignGradKernel<T>, config.block_count,
                                config.thread_per_block, 0, d.stream(), size,
                                args, grads, rois_scratch, grad_features));
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
