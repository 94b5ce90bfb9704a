// CPU kernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients), which share one functor; GPU kernel registration.

#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include "tensorflow_customops/core/kernels/roi_align_op.h"

#include <algorithm>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/roi_kernel_util.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace {

// acc[c] += sum_j weight[j] * corner_j[c * stride] for c < n. The stride-1
// case (NHWC RoiAlign) is a separate loop so the compiler vectorises it; both
// do the same operations in the same order, so they give the same bits.
template <typename T, typename A>
void AddSample(A* __restrict__ acc, const T* __restrict__ v0,
               const T* __restrict__ v1, const T* __restrict__ v2,
               const T* __restrict__ v3, const A* weight, int64_t stride,
               int64_t n) {
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
void Scatter(A* __restrict__ out, const A* __restrict__ g, A w, int64_t stride,
             int64_t n) {
  if (stride == 1) {
    for (int64_t c = 0; c < n; ++c) out[c] += g[c] * w;
    return;
  }
  for (int64_t c = 0; c < n; ++c) out[c * stride] += g[c] * w;
}

}  // namespace

namespace functor {

template <typename T>
struct RoiAlign<CPUDevice, T> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* features, const float* rois, T* pooled) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const int64_t channels = s.out_channels;
    // One work item is one output bin with all its channels: each bilinear
    // weight is computed once per sample and applied to every channel, and
    // each item writes only its own outputs.
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<A> acc(channels);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t k = item / a.bins();
        const int ph =
            static_cast<int>(item / a.pooled_width % a.pooled_height);
        const int pw = static_cast<int>(item % a.pooled_width);
        const float* roi = rois + k * 5;
        const T* image = features + static_cast<int64_t>(roi[0]) *
                                        args.features_layout.n_stride;
        const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, roi);
        int64_t cs, first;
        roi::BinChannels(args, ph, pw, &cs, &first);
        const T* base = image + first;
        std::fill(acc.begin(), acc.end(), A(0));
        roi::ForEachSample(
            args, box, ph, pw, [&](const roi::BilinearSample<A>& p) {
              AddSample(acc.data(), base + p.offset[0], base + p.offset[1],
                        base + p.offset[2], base + p.offset[3], p.weight, cs,
                        channels);
            });
        const A count = roi::SampleCount(box);
        for (int64_t c = 0; c < channels; ++c) {
          pooled[args.pooled_layout.Offset(k, ph, pw, c)] =
              static_cast<T>(acc[c] / count);
        }
      }
    };
    const int64_t samples =
        a.sampling_ratio > 0 ? a.sampling_ratio * a.sampling_ratio : 4;
    d.parallelFor(
        s.num_rois * a.bins(),
        Eigen::TensorOpCost(samples * channels * 4 * sizeof(T),
                            channels * sizeof(T), samples * channels * 10),
        work);
  }
};

template <typename T>
struct RoiAlignGrad<CPUDevice, T> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const float* rois, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::RoisByImage groups =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    const int64_t samples =
        a.sampling_ratio > 0 ? a.sampling_ratio * a.sampling_ratio : 4;
    const int64_t cost =
        std::max<int64_t>(1, s.num_rois / std::max<int64_t>(s.batch, 1)) *
        a.bins() * samples * 8;
    roi::ParallelBackward(
        d, s, args.features_layout, cost, grad_features,
        [&](int64_t n, int64_t c_begin, int64_t c_end, A* image) {
          const int64_t block = c_end - c_begin;
          // The incoming gradient of one bin's channel block, over count.
          std::vector<A> g(block);
          for (int64_t r = groups.begin[n]; r < groups.begin[n + 1]; ++r) {
            const int64_t k = groups.order[r];
            const roi::AlignBox<A> box = roi::MakeAlignBox<A>(a, rois + k * 5);
            const A count = roi::SampleCount(box);
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                for (int64_t c = c_begin; c < c_end; ++c) {
                  g[c - c_begin] =
                      static_cast<A>(
                          grads[args.pooled_layout.Offset(k, ph, pw, c)]) /
                      count;
                }
                int64_t cs, first;
                roi::BinChannels(args, ph, pw, &cs, &first);
                A* channels = image + first + c_begin * cs;
                roi::ForEachSample(args, box, ph, pw,
                                   [&](const roi::BilinearSample<A>& p) {
                                     for (int j = 0; j < 4; ++j) {
                                       Scatter(channels + p.offset[j], g.data(),
                                               p.weight[j], cs, block);
                                     }
                                   });
              }
            }
          }
        });
  }
};

}  // namespace functor

namespace {

// The launcher of RoiForwardOp and RoiBackwardOp: both kinds share the
// functors, which read the kind from the args.
template <typename Device, typename T>
struct AlignLaunch {
  static void Forward(const Device& d, const roi::RoiArgs& args,
                      const T* features, const float* rois,
                      Tensor* const* outputs) {
    functor::RoiAlign<Device, T>()(d, args, features, rois,
                                   outputs[0]->flat<T>().data());
  }
  static void Backward(const Device& d, const roi::RoiArgs& args,
                       const T* grads, const float* rois,
                       const int32_t* /*argmax*/, T* grad_features) {
    functor::RoiAlignGrad<Device, T>()(d, args, grads, rois, grad_features);
  }
};

}  // namespace

#define REGISTER(device, DeviceType, T)                                      \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "RoiAlign", RoiKind::kAlign, \
                            AlignLaunch, T);                                 \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "PsRoiAlign",                \
                            RoiKind::kPsAlign, AlignLaunch, T);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, CPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

namespace functor {
#define DECLARE_GPU_SPEC(T)                      \
  extern template struct RoiAlign<GPUDevice, T>; \
  extern template struct RoiAlignGrad<GPUDevice, T>;
TF_CALL_FLOAT_TYPES(DECLARE_GPU_SPEC);
#undef DECLARE_GPU_SPEC
}  // namespace functor

#define REGISTER_GPU(T) REGISTER(DEVICE_GPU, GPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA
#undef REGISTER

}  // namespace customops
}  // namespace tensorflow
