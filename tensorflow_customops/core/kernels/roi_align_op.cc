// CPU kernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients), which share one functor; GPU kernel registration.

#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include "tensorflow_customops/core/kernels/roi_align_op.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/roi_kernel_util.h"

namespace tensorflow {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace {

RoiAlignArgs MakeArgs(const roi::RoiShape& shape, const roi::RoiAttrs& attrs,
                      const roi::Layout& features_layout) {
  RoiAlignArgs args;
  args.shape = shape;
  args.features_layout = features_layout;
  args.pooled_layout = roi::PooledLayout(shape, attrs);
  args.spatial_scale = attrs.spatial_scale;
  args.sampling_ratio = attrs.sampling_ratio;
  args.aligned = attrs.aligned;
  args.position_sensitive = attrs.position_sensitive;
  return args;
}

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
  void operator()(const CPUDevice& d, const RoiAlignArgs& args,
                  const T* features, const float* rois, float* /*scratch*/,
                  T* pooled) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const int64_t channels = s.out_channels;
    const int64_t bins_per_roi =
        static_cast<int64_t>(s.pooled_height) * s.pooled_width;
    // One work item is one output bin with all its channels: each bilinear
    // weight is computed once per sample and applied to every channel, and
    // each item writes only its own outputs.
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<A> acc(channels);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t k = item / bins_per_roi;
        const int ph =
            static_cast<int>(item / s.pooled_width % s.pooled_height);
        const int pw = static_cast<int>(item % s.pooled_width);
        const float* roi = rois + k * 5;
        const T* image = features + static_cast<int64_t>(roi[0]) *
                                        args.features_layout.n_stride;
        const roi::AlignBox<A> box = roi::BoxOf<A>(args, roi);
        int64_t cs, first;
        roi::BinChannels(args, ph, pw, &cs, &first);
        std::fill(acc.begin(), acc.end(), A(0));
        for (int iy = 0; iy < box.grid_h; ++iy) {
          const A y =
              roi::SamplePoint(box.start_h, ph, box.bin_h, iy, box.grid_h);
          for (int ix = 0; ix < box.grid_w; ++ix) {
            const A x =
                roi::SamplePoint(box.start_w, pw, box.bin_w, ix, box.grid_w);
            const roi::BilinearSample<A> p =
                roi::Bilinear<A>(y, x, s.height, s.width, args.features_layout);
            if (!p.valid) continue;
            const T* base = image + first;
            AddSample(acc.data(), base + p.offset[0], base + p.offset[1],
                      base + p.offset[2], base + p.offset[3], p.weight, cs,
                      channels);
          }
        }
        const A count = roi::SampleCount(box);
        for (int64_t c = 0; c < channels; ++c) {
          pooled[args.pooled_layout.Offset(k, ph, pw, c)] =
              static_cast<T>(acc[c] / count);
        }
      }
    };
    const int64_t samples =
        args.sampling_ratio > 0 ? args.sampling_ratio * args.sampling_ratio : 4;
    d.parallelFor(
        s.num_rois * bins_per_roi,
        Eigen::TensorOpCost(samples * channels * 4 * sizeof(T),
                            channels * sizeof(T), samples * channels * 10),
        work);
  }
};

template <typename T>
struct RoiAlignGrad<CPUDevice, T> {
  void operator()(const CPUDevice& d, const RoiAlignArgs& args, const T* grads,
                  const float* rois, float* /*scratch*/, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoisByImage groups =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    const int64_t samples =
        args.sampling_ratio > 0 ? args.sampling_ratio * args.sampling_ratio : 4;
    const int64_t cost =
        std::max<int64_t>(1, s.num_rois / std::max<int64_t>(s.batch, 1)) *
        s.pooled_height * s.pooled_width * samples * 8;
    roi::ParallelBackward(
        d, s, args.features_layout, cost, grad_features,
        [&](int64_t n, int64_t c_begin, int64_t c_end, A* image) {
          const int64_t block = c_end - c_begin;
          // The incoming gradient of one bin's channel block, over count.
          std::vector<A> g(block);
          for (int64_t r = groups.begin[n]; r < groups.begin[n + 1]; ++r) {
            const int64_t k = groups.order[r];
            const roi::AlignBox<A> box = roi::BoxOf<A>(args, rois + k * 5);
            const A count = roi::SampleCount(box);
            for (int ph = 0; ph < s.pooled_height; ++ph) {
              for (int pw = 0; pw < s.pooled_width; ++pw) {
                for (int64_t c = c_begin; c < c_end; ++c) {
                  g[c - c_begin] =
                      static_cast<A>(
                          grads[args.pooled_layout.Offset(k, ph, pw, c)]) /
                      count;
                }
                int64_t cs, first;
                roi::BinChannels(args, ph, pw, &cs, &first);
                A* channels = image + first + c_begin * cs;
                for (int iy = 0; iy < box.grid_h; ++iy) {
                  const A y = roi::SamplePoint(box.start_h, ph, box.bin_h, iy,
                                               box.grid_h);
                  for (int ix = 0; ix < box.grid_w; ++ix) {
                    const A x = roi::SamplePoint(box.start_w, pw, box.bin_w, ix,
                                                 box.grid_w);
                    const roi::BilinearSample<A> p = roi::Bilinear<A>(
                        y, x, s.height, s.width, args.features_layout);
                    if (!p.valid) continue;
                    for (int j = 0; j < 4; ++j) {
                      Scatter(channels + p.offset[j], g.data(), p.weight[j], cs,
                              block);
                    }
                  }
                }
              }
            }
          }
        });
  }
};

}  // namespace functor

template <typename Device, typename T>
class RoiAlignOp : public OpKernel {
 public:
  explicit RoiAlignOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context,
                   roi::ReadRoiAttrs(context,
                                     type_string() == "CustomOps>PsRoiAlign"
                                         ? roi::OpKind::kPsAlign
                                         : roi::OpKind::kAlign,
                                     &attrs_));
  }

  void Compute(OpKernelContext* context) override {
    roi::RoiCall call;
    Tensor* pooled;
    OP_REQUIRES_OK(context, roi::PrepareForward(context, attrs_, kDouble,
                                                kOnGpu, &call, &pooled));
    if (call.empty) return;
    OP_REQUIRES_OK(context,
                   roi::ReadFeaturesChannelsLast(
                       context, call.shape, attrs_, kOnGpu, context->input(0),
                       [&](const roi::Layout& layout, const Tensor& features) {
                         functor::RoiAlign<Device, T>()(
                             context->eigen_device<Device>(),
                             MakeArgs(call.shape, attrs_, layout),
                             features.flat<T>().data(),
                             context->input(1).flat<float>().data(),
                             call.device_rois, pooled->flat<T>().data());
                       }));
  }

 private:
  static constexpr bool kDouble = std::is_same<T, double>::value;
  static constexpr bool kOnGpu = std::is_same<Device, GPUDevice>::value;
  roi::RoiAttrs attrs_;
};

template <typename Device, typename T>
class RoiAlignGradOp : public OpKernel {
 public:
  explicit RoiAlignGradOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context,
                   roi::ReadRoiAttrs(context,
                                     type_string() == "CustomOps>PsRoiAlignGrad"
                                         ? roi::OpKind::kPsAlign
                                         : roi::OpKind::kAlign,
                                     &attrs_));
  }

  void Compute(OpKernelContext* context) override {
    roi::RoiCall call;
    Tensor* grad_features;
    OP_REQUIRES_OK(context,
                   roi::PrepareBackward(context, attrs_, 2, kDouble, kOnGpu,
                                        &call, &grad_features));
    if (call.empty) return;
    OP_REQUIRES_OK(context,
                   roi::WriteFeaturesChannelsLast(
                       context, call.shape, attrs_, kOnGpu, grad_features,
                       [&](const roi::Layout& layout, Tensor* grad_features) {
                         functor::RoiAlignGrad<Device, T>()(
                             context->eigen_device<Device>(),
                             MakeArgs(call.shape, attrs_, layout),
                             context->input(0).flat<T>().data(),
                             context->input(1).flat<float>().data(),
                             call.device_rois, grad_features->flat<T>().data());
                       }));
  }

 private:
  static constexpr bool kDouble = std::is_same<T, double>::value;
  static constexpr bool kOnGpu = std::is_same<Device, GPUDevice>::value;
  roi::RoiAttrs attrs_;
};

#define REGISTER_CPU(T)                                                       \
  REGISTER_KERNEL_BUILDER(                                                    \
      Name("CustomOps>RoiAlign").Device(DEVICE_CPU).TypeConstraint<T>("T"),   \
      RoiAlignOp<CPUDevice, T>);                                              \
  REGISTER_KERNEL_BUILDER(                                                    \
      Name("CustomOps>PsRoiAlign").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
      RoiAlignOp<CPUDevice, T>);                                              \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiAlignGrad")                      \
                              .Device(DEVICE_CPU)                             \
                              .TypeConstraint<T>("T")                         \
                              .HostMemory("features_shape"),                  \
                          RoiAlignGradOp<CPUDevice, T>);                      \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>PsRoiAlignGrad")                    \
                              .Device(DEVICE_CPU)                             \
                              .TypeConstraint<T>("T")                         \
                              .HostMemory("features_shape"),                  \
                          RoiAlignGradOp<CPUDevice, T>);
TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

namespace functor {
#define DECLARE_GPU_SPEC(T)                      \
  extern template struct RoiAlign<GPUDevice, T>; \
  extern template struct RoiAlignGrad<GPUDevice, T>;
TF_CALL_half(DECLARE_GPU_SPEC);
TF_CALL_bfloat16(DECLARE_GPU_SPEC);
TF_CALL_float(DECLARE_GPU_SPEC);
TF_CALL_double(DECLARE_GPU_SPEC);
#undef DECLARE_GPU_SPEC
}  // namespace functor

// rois live in host memory so that every box (its batch index above all) is
// validated on the host before anything is launched.
#define REGISTER_GPU(T)                                      \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiAlign")         \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois"),           \
                          RoiAlignOp<GPUDevice, T>);         \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>PsRoiAlign")       \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois"),           \
                          RoiAlignOp<GPUDevice, T>);         \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiAlignGrad")     \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois")            \
                              .HostMemory("features_shape"), \
                          RoiAlignGradOp<GPUDevice, T>);     \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>PsRoiAlignGrad")   \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois")            \
                              .HostMemory("features_shape"), \
                          RoiAlignGradOp<GPUDevice, T>);
TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA

}  // namespace tensorflow
