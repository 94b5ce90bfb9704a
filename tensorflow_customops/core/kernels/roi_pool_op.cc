// CPU kernels of CustomOps>RoiPool (max) and CustomOps>PsRoiPool
// (position-sensitive average), which share the whole-pixel bin geometry, and
// of their gradients; GPU kernel registration.

#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include "tensorflow_customops/core/kernels/roi_pool_op.h"

#include <algorithm>
#include <limits>
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

RoiPoolArgs MakeArgs(const roi::RoiShape& shape, const roi::RoiAttrs& attrs,
                     const roi::Layout& features_layout) {
  RoiPoolArgs args;
  args.shape = shape;
  args.features_layout = features_layout;
  args.pooled_layout = roi::PooledLayout(shape, attrs);
  args.spatial_scale = attrs.spatial_scale;
  return args;
}

// Runs body(k, ph, pw) for every output bin in parallel; each bin's outputs
// are written by one thread.
template <typename Body>
void ForEachBin(const CPUDevice& d, const roi::RoiShape& s, int64_t cost,
                const Body& body) {
  const int64_t bins = static_cast<int64_t>(s.pooled_height) * s.pooled_width;
  d.parallelFor(
      s.num_rois * bins, Eigen::TensorOpCost(cost, cost, cost),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          body(item / bins,
               static_cast<int>(item / s.pooled_width % s.pooled_height),
               static_cast<int>(item % s.pooled_width));
        }
      });
}

// Typical pixels per bin, for the cost model only.
int64_t PixelsPerBin(const roi::RoiShape& s) {
  return std::max<int64_t>(
      1, s.height * s.width /
             (static_cast<int64_t>(s.pooled_height) * s.pooled_width * 4));
}

}  // namespace

namespace functor {

template <typename T>
struct RoiPool<CPUDevice, T> {
  void operator()(const CPUDevice& d, const RoiPoolArgs& args,
                  const T* features, const float* rois, float* /*scratch*/,
                  T* pooled, int32_t* argmax) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::Layout& in = args.features_layout;
    ForEachBin(
        d, s, PixelsPerBin(s) * s.channels, [&](int64_t k, int ph, int pw) {
          const float* roi = rois + k * 5;
          roi::BinRange h, w;
          roi::PoolBins<A>(args, roi, ph, pw, /*position_sensitive=*/false, &h,
                           &w);
          const bool empty = h.end <= h.start || w.end <= w.start;
          // As torchvision: the running maximum starts at -FLT_MAX and only a
          // strictly greater value replaces it, so the first maximum in (h, w)
          // scan order wins and NaNs are skipped.
          std::vector<A> best(
              s.channels, empty ? A(0) : A(-std::numeric_limits<float>::max()));
          std::vector<int32_t> best_index(s.channels, -1);
          const T* image =
              features + static_cast<int64_t>(roi[0]) * in.n_stride;
          for (int64_t y = h.start; y < h.end; ++y) {
            for (int64_t x = w.start; x < w.end; ++x) {
              const T* pixel = image + y * in.h_stride + x * in.w_stride;
              const int32_t index = static_cast<int32_t>(y * s.width + x);
              for (int64_t c = 0; c < s.channels; ++c) {
                const A v = static_cast<A>(pixel[c * in.c_stride]);
                if (v > best[c]) {
                  best[c] = v;
                  best_index[c] = index;
                }
              }
            }
          }
          for (int64_t c = 0; c < s.channels; ++c) {
            const int64_t o = args.pooled_layout.Offset(k, ph, pw, c);
            pooled[o] = static_cast<T>(best[c]);
            argmax[o] = best_index[c];
          }
        });
  }
};

template <typename T>
struct RoiPoolGrad<CPUDevice, T> {
  void operator()(const CPUDevice& d, const RoiPoolArgs& args, const T* grads,
                  const float* rois, float* /*scratch*/, const int32_t* argmax,
                  T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::Layout& in = args.features_layout;
    const roi::RoisByImage groups =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    roi::ParallelBackward(
        d, s, in, s.num_rois * s.pooled_height * s.pooled_width, grad_features,
        [&](int64_t n, int64_t c_begin, int64_t c_end, A* image) {
          for (int64_t r = groups.begin[n]; r < groups.begin[n + 1]; ++r) {
            const int64_t k = groups.order[r];
            for (int ph = 0; ph < s.pooled_height; ++ph) {
              for (int pw = 0; pw < s.pooled_width; ++pw) {
                for (int64_t c = c_begin; c < c_end; ++c) {
                  const int64_t o = args.pooled_layout.Offset(k, ph, pw, c);
                  const int32_t index = argmax[o];
                  if (index < 0) continue;
                  image[in.Offset(0, index / s.width, index % s.width, c)] +=
                      static_cast<A>(grads[o]);
                }
              }
            }
          }
        });
  }
};

template <typename T>
struct PsRoiPool<CPUDevice, T> {
  void operator()(const CPUDevice& d, const RoiPoolArgs& args,
                  const T* features, const float* rois, float* /*scratch*/,
                  T* pooled) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::Layout& in = args.features_layout;
    const int64_t groups =
        static_cast<int64_t>(s.pooled_height) * s.pooled_width;
    ForEachBin(
        d, s, PixelsPerBin(s) * s.out_channels, [&](int64_t k, int ph, int pw) {
          const float* roi = rois + k * 5;
          roi::BinRange h, w;
          roi::PoolBins<A>(args, roi, ph, pw, /*position_sensitive=*/true, &h,
                           &w);
          std::vector<A> sum(s.out_channels, A(0));
          const T* image =
              features + static_cast<int64_t>(roi[0]) * in.n_stride +
              roi::PsChannel(0, ph, pw, s.pooled_height, s.pooled_width) *
                  in.c_stride;
          for (int64_t y = h.start; y < h.end; ++y) {
            for (int64_t x = w.start; x < w.end; ++x) {
              const T* pixel = image + y * in.h_stride + x * in.w_stride;
              for (int64_t c = 0; c < s.out_channels; ++c) {
                sum[c] += static_cast<A>(pixel[c * groups * in.c_stride]);
              }
            }
          }
          const bool empty = h.end <= h.start || w.end <= w.start;
          const A area = static_cast<A>((h.end - h.start) * (w.end - w.start));
          for (int64_t c = 0; c < s.out_channels; ++c) {
            pooled[args.pooled_layout.Offset(k, ph, pw, c)] =
                empty ? T(0) : static_cast<T>(sum[c] / area);
          }
        });
  }
};

template <typename T>
struct PsRoiPoolGrad<CPUDevice, T> {
  void operator()(const CPUDevice& d, const RoiPoolArgs& args, const T* grads,
                  const float* rois, float* /*scratch*/, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::Layout& in = args.features_layout;
    const int64_t groups =
        static_cast<int64_t>(s.pooled_height) * s.pooled_width;
    const roi::RoisByImage by_image =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    roi::ParallelBackward(
        d, s, in, s.num_rois * groups * PixelsPerBin(s), grad_features,
        [&](int64_t n, int64_t c_begin, int64_t c_end, A* image) {
          for (int64_t r = by_image.begin[n]; r < by_image.begin[n + 1]; ++r) {
            const int64_t k = by_image.order[r];
            const float* roi = rois + k * 5;
            for (int ph = 0; ph < s.pooled_height; ++ph) {
              for (int pw = 0; pw < s.pooled_width; ++pw) {
                roi::BinRange h, w;
                roi::PoolBins<A>(args, roi, ph, pw, /*position_sensitive=*/true,
                                 &h, &w);
                if (h.end <= h.start || w.end <= w.start) continue;
                const A area =
                    static_cast<A>((h.end - h.start) * (w.end - w.start));
                A* group = image + roi::PsChannel(0, ph, pw, s.pooled_height,
                                                  s.pooled_width) *
                                       in.c_stride;
                for (int64_t c = c_begin; c < c_end; ++c) {
                  const A g =
                      static_cast<A>(
                          grads[args.pooled_layout.Offset(k, ph, pw, c)]) /
                      area;
                  A* channel = group + c * groups * in.c_stride;
                  for (int64_t y = h.start; y < h.end; ++y) {
                    for (int64_t x = w.start; x < w.end; ++x) {
                      channel[y * in.h_stride + x * in.w_stride] += g;
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

namespace {

// Shared by the four kernels: their attrs and where they run.
template <typename Device, typename T>
class RoiPoolKernelBase : public OpKernel {
 public:
  RoiPoolKernelBase(OpKernelConstruction* context, roi::OpKind kind)
      : OpKernel(context) {
    OP_REQUIRES_OK(context, roi::ReadRoiAttrs(context, kind, &attrs_));
  }

 protected:
  static constexpr bool kOnGpu = std::is_same<Device, GPUDevice>::value;
  roi::RoiAttrs attrs_;
};

template <typename Device, typename T>
class RoiPoolOp : public RoiPoolKernelBase<Device, T> {
 public:
  explicit RoiPoolOp(OpKernelConstruction* context)
      : RoiPoolKernelBase<Device, T>(context, roi::OpKind::kPool) {}

  void Compute(OpKernelContext* context) override {
    roi::RoiCall call;
    Tensor* outputs[2];
    OP_REQUIRES_OK(context, roi::PrepareForward(context, this->attrs_, false,
                                                this->kOnGpu, &call, outputs));
    if (call.empty) return;
    OP_REQUIRES_OK(
        context,
        roi::ReadFeaturesChannelsLast(
            context, call.shape, this->attrs_, this->kOnGpu, context->input(0),
            [&](const roi::Layout& layout, const Tensor& features) {
              functor::RoiPool<Device, T>()(
                  context->eigen_device<Device>(),
                  MakeArgs(call.shape, this->attrs_, layout),
                  features.flat<T>().data(),
                  context->input(1).flat<float>().data(), call.device_rois,
                  outputs[0]->flat<T>().data(),
                  outputs[1]->flat<int32_t>().data());
            }));
  }
};

// argmax must have the pooled shape, and every entry must be -1 or a pixel of
// the map: the gradient op writes where it points. On GPU the values live in
// device memory and the kernel skips out-of-range entries instead.
absl::Status ValidateArgmax(const Tensor& argmax, const TensorShape& expected,
                            int64_t area, bool check_values) {
  if (argmax.shape() != expected) {
    return errors::InvalidArgument("argmax must have shape ",
                                   expected.DebugString(), ", got ",
                                   argmax.shape().DebugString());
  }
  if (!check_values) return absl::OkStatus();
  const auto values = argmax.flat<int32_t>();
  for (int64_t i = 0; i < values.size(); ++i) {
    if (values(i) < -1 || values(i) >= area) {
      return errors::InvalidArgument("argmax[", i, "] = ", values(i),
                                     " is not -1 or a pixel index in [0, ",
                                     area, ")");
    }
  }
  return absl::OkStatus();
}

template <typename Device, typename T>
class RoiPoolGradOp : public RoiPoolKernelBase<Device, T> {
 public:
  explicit RoiPoolGradOp(OpKernelConstruction* context)
      : RoiPoolKernelBase<Device, T>(context, roi::OpKind::kPool) {}

  void Compute(OpKernelContext* context) override {
    roi::RoiCall call;
    Tensor* grad_features;
    OP_REQUIRES_OK(context,
                   roi::PrepareBackward(context, this->attrs_, 3, false,
                                        this->kOnGpu, &call, &grad_features));
    const Tensor& argmax = context->input(2);
    OP_REQUIRES_OK(context, ValidateArgmax(argmax, context->input(0).shape(),
                                           call.shape.height * call.shape.width,
                                           !this->kOnGpu));
    if (call.empty) return;
    OP_REQUIRES_OK(
        context,
        roi::WriteFeaturesChannelsLast(
            context, call.shape, this->attrs_, this->kOnGpu, grad_features,
            [&](const roi::Layout& layout, Tensor* grad_features) {
              functor::RoiPoolGrad<Device, T>()(
                  context->eigen_device<Device>(),
                  MakeArgs(call.shape, this->attrs_, layout),
                  context->input(0).flat<T>().data(),
                  context->input(1).flat<float>().data(), call.device_rois,
                  argmax.flat<int32_t>().data(),
                  grad_features->flat<T>().data());
            }));
  }
};

template <typename Device, typename T>
class PsRoiPoolOp : public RoiPoolKernelBase<Device, T> {
 public:
  explicit PsRoiPoolOp(OpKernelConstruction* context)
      : RoiPoolKernelBase<Device, T>(context, roi::OpKind::kPsPool) {}

  void Compute(OpKernelContext* context) override {
    roi::RoiCall call;
    Tensor* pooled;
    OP_REQUIRES_OK(context, roi::PrepareForward(context, this->attrs_, false,
                                                this->kOnGpu, &call, &pooled));
    if (call.empty) return;
    OP_REQUIRES_OK(
        context,
        roi::ReadFeaturesChannelsLast(
            context, call.shape, this->attrs_, this->kOnGpu, context->input(0),
            [&](const roi::Layout& layout, const Tensor& features) {
              functor::PsRoiPool<Device, T>()(
                  context->eigen_device<Device>(),
                  MakeArgs(call.shape, this->attrs_, layout),
                  features.flat<T>().data(),
                  context->input(1).flat<float>().data(), call.device_rois,
                  pooled->flat<T>().data());
            }));
  }
};

template <typename Device, typename T>
class PsRoiPoolGradOp : public RoiPoolKernelBase<Device, T> {
 public:
  explicit PsRoiPoolGradOp(OpKernelConstruction* context)
      : RoiPoolKernelBase<Device, T>(context, roi::OpKind::kPsPool) {}

  void Compute(OpKernelContext* context) override {
    roi::RoiCall call;
    Tensor* grad_features;
    OP_REQUIRES_OK(context,
                   roi::PrepareBackward(context, this->attrs_, 2, false,
                                        this->kOnGpu, &call, &grad_features));
    if (call.empty) return;
    OP_REQUIRES_OK(
        context,
        roi::WriteFeaturesChannelsLast(
            context, call.shape, this->attrs_, this->kOnGpu, grad_features,
            [&](const roi::Layout& layout, Tensor* grad_features) {
              functor::PsRoiPoolGrad<Device, T>()(
                  context->eigen_device<Device>(),
                  MakeArgs(call.shape, this->attrs_, layout),
                  context->input(0).flat<T>().data(),
                  context->input(1).flat<float>().data(), call.device_rois,
                  grad_features->flat<T>().data());
            }));
  }
};

}  // namespace

#define REGISTER_CPU(T)                                                      \
  REGISTER_KERNEL_BUILDER(                                                   \
      Name("CustomOps>RoiPool").Device(DEVICE_CPU).TypeConstraint<T>("T"),   \
      RoiPoolOp<CPUDevice, T>);                                              \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiPoolGrad")                      \
                              .Device(DEVICE_CPU)                            \
                              .TypeConstraint<T>("T")                        \
                              .HostMemory("features_shape"),                 \
                          RoiPoolGradOp<CPUDevice, T>);                      \
  REGISTER_KERNEL_BUILDER(                                                   \
      Name("CustomOps>PsRoiPool").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
      PsRoiPoolOp<CPUDevice, T>);                                            \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>PsRoiPoolGrad")                    \
                              .Device(DEVICE_CPU)                            \
                              .TypeConstraint<T>("T")                        \
                              .HostMemory("features_shape"),                 \
                          PsRoiPoolGradOp<CPUDevice, T>);
TF_CALL_half(REGISTER_CPU);
TF_CALL_bfloat16(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

namespace functor {
#define DECLARE_GPU_SPEC(T)                         \
  extern template struct RoiPool<GPUDevice, T>;     \
  extern template struct RoiPoolGrad<GPUDevice, T>; \
  extern template struct PsRoiPool<GPUDevice, T>;   \
  extern template struct PsRoiPoolGrad<GPUDevice, T>;
TF_CALL_half(DECLARE_GPU_SPEC);
TF_CALL_bfloat16(DECLARE_GPU_SPEC);
TF_CALL_float(DECLARE_GPU_SPEC);
TF_CALL_double(DECLARE_GPU_SPEC);
#undef DECLARE_GPU_SPEC
}  // namespace functor

// rois live in host memory so that every box (its batch index above all) is
// validated on the host before anything is launched.
#define REGISTER_GPU(T)                                      \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiPool")          \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois"),           \
                          RoiPoolOp<GPUDevice, T>);          \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiPoolGrad")      \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois")            \
                              .HostMemory("features_shape"), \
                          RoiPoolGradOp<GPUDevice, T>);      \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>PsRoiPool")        \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois"),           \
                          PsRoiPoolOp<GPUDevice, T>);        \
  REGISTER_KERNEL_BUILDER(Name("CustomOps>PsRoiPoolGrad")    \
                              .Device(DEVICE_GPU)            \
                              .TypeConstraint<T>("T")        \
                              .HostMemory("rois")            \
                              .HostMemory("features_shape"), \
                          PsRoiPoolGradOp<GPUDevice, T>);
TF_CALL_half(REGISTER_GPU);
TF_CALL_bfloat16(REGISTER_GPU);
TF_CALL_float(REGISTER_GPU);
TF_CALL_double(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA

}  // namespace tensorflow
