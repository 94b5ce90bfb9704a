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

// Runs body(k, ph, pw) for every output bin in parallel; each bin's outputs
// are written by one thread.
template <typename Body>
void ForEachBin(const CPUDevice& d, const roi::RoiArgs& args, int64_t cost,
                const Body& body) {
  const roi::RoiAttrs& a = args.attrs;
  d.parallelFor(
      args.shape.num_rois * a.bins(), Eigen::TensorOpCost(cost, cost, cost),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          body(item / a.bins(),
               static_cast<int>(item / a.pooled_width % a.pooled_height),
               static_cast<int>(item % a.pooled_width));
        }
      });
}

// Typical pixels per bin, for the cost model only.
int64_t PixelsPerBin(const roi::RoiArgs& args) {
  return std::max<int64_t>(
      1, args.shape.height * args.shape.width / (args.attrs.bins() * 4));
}

}  // namespace

namespace functor {

template <typename T>
struct RoiPool<CPUDevice, T> {
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* features, const float* rois, T* pooled,
                  int32_t* argmax) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::Layout& in = args.features_layout;
    ForEachBin(
        d, args, PixelsPerBin(args) * s.channels,
        [&](int64_t k, int ph, int pw) {
          const float* roi = rois + k * 5;
          roi::BinRange h, w;
          roi::PoolBins<A>(args, roi, ph, pw, &h, &w);
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
  void operator()(const CPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const float* rois, const int32_t* argmax, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const roi::RoisByImage groups =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    roi::ParallelBackward(
        d, s, in, s.num_rois * a.bins(), grad_features,
        [&](int64_t n, int64_t c_begin, int64_t c_end, A* image) {
          for (int64_t r = groups.begin[n]; r < groups.begin[n + 1]; ++r) {
            const int64_t k = groups.order[r];
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              for (int pw = 0; pw < a.pooled_width; ++pw) {
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
  void operator()(const CPUDevice& d, const roi::RoiArgs& args,
                  const T* features, const float* rois, T* pooled) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const int64_t groups = a.bins();
    ForEachBin(
        d, args, PixelsPerBin(args) * s.out_channels,
        [&](int64_t k, int ph, int pw) {
          const float* roi = rois + k * 5;
          roi::BinRange h, w;
          roi::PoolBins<A>(args, roi, ph, pw, &h, &w);
          std::vector<A> sum(s.out_channels, A(0));
          const T* image =
              features + static_cast<int64_t>(roi[0]) * in.n_stride +
              roi::PsChannel(0, ph, pw, a.pooled_height, a.pooled_width) *
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
  void operator()(const CPUDevice& d, const roi::RoiArgs& args, const T* grads,
                  const float* rois, T* grad_features) {
    typedef typename roi::AccumulatorType<T>::type A;
    const roi::RoiShape& s = args.shape;
    const roi::RoiAttrs& a = args.attrs;
    const roi::Layout& in = args.features_layout;
    const int64_t groups = a.bins();
    const roi::RoisByImage by_image =
        roi::GroupRoisByImage(rois, s.num_rois, s.batch);
    roi::ParallelBackward(
        d, s, in, s.num_rois * groups * PixelsPerBin(args), grad_features,
        [&](int64_t n, int64_t c_begin, int64_t c_end, A* image) {
          for (int64_t r = by_image.begin[n]; r < by_image.begin[n + 1]; ++r) {
            const int64_t k = by_image.order[r];
            const float* roi = rois + k * 5;
            for (int ph = 0; ph < a.pooled_height; ++ph) {
              for (int pw = 0; pw < a.pooled_width; ++pw) {
                roi::BinRange h, w;
                roi::PoolBins<A>(args, roi, ph, pw, &h, &w);
                if (h.end <= h.start || w.end <= w.start) continue;
                const A area =
                    static_cast<A>((h.end - h.start) * (w.end - w.start));
                A* group = image + roi::PsChannel(0, ph, pw, a.pooled_height,
                                                  a.pooled_width) *
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

// The launchers of RoiForwardOp and RoiBackwardOp.
template <typename Device, typename T>
struct PoolLaunch {
  static void Forward(const Device& d, const roi::RoiArgs& args,
                      const T* features, const float* rois,
                      Tensor* const* outputs) {
    functor::RoiPool<Device, T>()(d, args, features, rois,
                                  outputs[0]->flat<T>().data(),
                                  outputs[1]->flat<int32_t>().data());
  }
  static void Backward(const Device& d, const roi::RoiArgs& args,
                       const T* grads, const float* rois, const int32_t* argmax,
                       T* grad_features) {
    functor::RoiPoolGrad<Device, T>()(d, args, grads, rois, argmax,
                                      grad_features);
  }
};

template <typename Device, typename T>
struct PsPoolLaunch {
  static void Forward(const Device& d, const roi::RoiArgs& args,
                      const T* features, const float* rois,
                      Tensor* const* outputs) {
    functor::PsRoiPool<Device, T>()(d, args, features, rois,
                                    outputs[0]->flat<T>().data());
  }
  static void Backward(const Device& d, const roi::RoiArgs& args,
                       const T* grads, const float* rois,
                       const int32_t* /*argmax*/, T* grad_features) {
    functor::PsRoiPoolGrad<Device, T>()(d, args, grads, rois, grad_features);
  }
};

}  // namespace

#define REGISTER(device, DeviceType, T)                                        \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "RoiPool", RoiKind::kPool,     \
                            PoolLaunch, T);                                    \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "PsRoiPool", RoiKind::kPsPool, \
                            PsPoolLaunch, T);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, CPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

namespace functor {
#define DECLARE_GPU_SPEC(T)                         \
  extern template struct RoiPool<GPUDevice, T>;     \
  extern template struct RoiPoolGrad<GPUDevice, T>; \
  extern template struct PsRoiPool<GPUDevice, T>;   \
  extern template struct PsRoiPoolGrad<GPUDevice, T>;
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
