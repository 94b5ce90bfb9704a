// Host-side attribute parsing and input validation shared by the RoI kernels.
// Every check runs before a kernel touches memory, and every failure is an
// InvalidArgument naming the argument.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_KERNEL_UTIL_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_KERNEL_UTIL_H_

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/core/kernels/roi_ops_common.h"
#include "tensorflow_customops/core/kernels/roi_shape_util.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Where a kernel runs and the precision its box arithmetic uses (double for
// double features, else float), fixed by its device and type.
struct RoiKernelOptions {
  bool on_gpu;
  bool double_precision;
};
template <typename Device, typename T>
constexpr RoiKernelOptions OptionsFor() {
  return RoiKernelOptions{!std::is_same<Device, Eigen::ThreadPoolDevice>::value,
                          std::is_same<T, double>::value};
}

// What a kernel knows once its inputs are validated and outputs allocated.
struct RoiCall {
  RoiArgs args;                     // layouts as the tensors are
  const float* rois = nullptr;      // the validated rois where the kernel runs
  const int32_t* argmax = nullptr;  // RoiPoolGrad's argmax input
  Tensor* outputs[2] = {};          // forward outputs (pooled, argmax)
  Tensor* grad_features = nullptr;  // gradient output
  Tensor device_rois;               // on GPU, the copy `rois` points to
  bool empty = false;               // the outputs have no elements
};

// Validates a forward kernel's features (input 0) and rois (input 1), and for
// the bilinear kinds the adaptive sampling grid (in the precision the kernel
// computes it in); allocates every output with the pooled shape and, on GPU,
// copies the rois to the device.
absl::Status PrepareForward(OpKernelContext* context, const RoiAttrs& attrs,
                            const RoiKernelOptions& options, RoiCall* call);

// The same for a gradient kernel: grads (input 0, with the pooled shape),
// rois (input 1), RoiPoolGrad's argmax (input 2) and features_shape (the last
// input); allocates the feature gradient (output 0).
absl::Status PrepareBackward(OpKernelContext* context, const RoiAttrs& attrs,
                             const RoiKernelOptions& options, RoiCall* call);

// An NHWC copy of the 4-D NCHW tensor `nchw`, made in parallel: the CPU
// forward kernels' NCHW path below. For the feature types of the RoI kernels.
absl::Status ToChannelsLast(OpKernelContext* context, const Tensor& nchw,
                            Tensor* nhwc);

#if GOOGLE_CUDA
// Copies `count` floats to the device and waits, so that the host buffer may
// be released afterwards (roi_kernel_util_gpu.cu.cc).
void CopyToDevice(const Eigen::GpuDevice& d, const float* host, int64_t count,
                  float* device);
#endif  // GOOGLE_CUDA

// The rois of batch image n are order[begin[n]] .. order[begin[n + 1] - 1],
// in increasing roi index: what a backward pass that shards over images needs
// to accumulate in a fixed order.
struct RoisByImage {
  std::vector<int64_t> order;
  std::vector<int64_t> begin;
};
RoisByImage GroupRoisByImage(const float* rois, int64_t num_rois,
                             int64_t batch);

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

// The CPU kernels' helpers, which run on TensorFlow's thread pool.
#ifdef EIGEN_USE_THREADS

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
void ParallelBackward(const Eigen::ThreadPoolDevice& d, const RoiArgs& args,
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
    const Eigen::ThreadPoolDevice& d, const T* data, int64_t size,
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

#endif  // EIGEN_USE_THREADS

// `args` with the feature map in NHWC.
inline RoiArgs ChannelsLast(RoiArgs args) {
  args.features_layout = Layout::Make(false, args.shape.height,
                                      args.shape.width, args.shape.channels);
  return args;
}

// NCHW kernels on CPU run with their feature map in NHWC, where channels are
// contiguous and the loops vectorise; pooled tensors keep their layout. Every
// element sees the same arithmetic in the same order, so the bits do not
// change. The forward, run(const RoiArgs& args, const Tensor& features) here,
// reads an NHWC copy of `features`; the backward writes NHWC bands into the
// NCHW gradient (ParallelBackward). Elsewhere (NHWC, GPU) `run` gets the
// tensors as they are.

template <typename Run>
absl::Status ReadFeaturesChannelsLast(OpKernelContext* context,
                                      const RoiKernelOptions& options,
                                      const RoiCall& call,
                                      const Tensor& features, const Run& run) {
  if (options.on_gpu || !call.args.attrs.nchw) {
    run(call.args, features);
    return absl::OkStatus();
  }
  Tensor copy;
  TF_RETURN_IF_ERROR(ToChannelsLast(context, features, &copy));
  run(ChannelsLast(call.args), copy);
  return absl::OkStatus();
}

// The op kernels of every RoI op and gradient: `kind`'s attrs, validation,
// the NCHW path above, then a family's launcher, Launch<Device, T>, which
// calls its functors:
//   static void Forward(const Device&, const RoiArgs&, const T* features,
//                       const float* rois, Tensor* const* outputs);
//   static void Backward(const Device&, const RoiArgs&, const T* grads,
//                        const float* rois, const int32_t* argmax,
//                        T* grad_features);
// (argmax is RoiPoolGrad's input, null for the other kinds).
template <RoiKind kKind>
class RoiOpKernel : public OpKernel {
 public:
  explicit RoiOpKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, ReadRoiAttrs(context, kKind, &attrs_));
  }

 protected:
  RoiAttrs attrs_;
};

template <typename Device, typename T, RoiKind kKind,
          template <typename, typename> class Launch>
class RoiForwardOp : public RoiOpKernel<kKind> {
 public:
  using RoiOpKernel<kKind>::RoiOpKernel;

  void Compute(OpKernelContext* context) override {
    constexpr RoiKernelOptions options = OptionsFor<Device, T>();
    RoiCall call;
    OP_REQUIRES_OK(context,
                   PrepareForward(context, this->attrs_, options, &call));
    if (call.empty) return;
    OP_REQUIRES_OK(
        context, ReadFeaturesChannelsLast(
                     context, options, call, context->input(0),
                     [&](const RoiArgs& args, const Tensor& features) {
                       Launch<Device, T>::Forward(
                           context->eigen_device<Device>(), args,
                           features.flat<T>().data(), call.rois, call.outputs);
                     }));
  }
};

template <typename Device, typename T, RoiKind kKind,
          template <typename, typename> class Launch>
class RoiBackwardOp : public RoiOpKernel<kKind> {
 public:
  using RoiOpKernel<kKind>::RoiOpKernel;

  void Compute(OpKernelContext* context) override {
    constexpr RoiKernelOptions options = OptionsFor<Device, T>();
    RoiCall call;
    OP_REQUIRES_OK(context,
                   PrepareBackward(context, this->attrs_, options, &call));
    if (call.empty) return;
    // On CPU the kernels add into NHWC bands and write them in the
    // gradient's layout (ParallelBackward).
    Launch<Device, T>::Backward(
        context->eigen_device<Device>(),
        options.on_gpu ? call.args : ChannelsLast(call.args),
        context->input(0).flat<T>().data(), call.rois, call.argmax,
        call.grad_features->flat<T>().data());
  }
};

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

// Registers the kernels of CustomOps>`op` and its gradient for type T on
// `device` (DEVICE_CPU or DEVICE_GPU; DeviceType is the Eigen device), built
// from RoiForwardOp and RoiBackwardOp with `Launch`. rois and features_shape
// live in host memory: every box (its batch index above all) is validated on
// the host before anything is launched.
#define TFCO_REGISTER_ROI_KERNELS(device, DeviceType, op, kind, Launch, T) \
  REGISTER_KERNEL_BUILDER(                                                 \
      Name("CustomOps>" op)                                                \
          .Device(device)                                                  \
          .TypeConstraint<T>("T")                                          \
          .HostMemory("rois"),                                             \
      ::tensorflow::customops::roi::RoiForwardOp<                          \
          DeviceType, T, ::tensorflow::customops::roi::kind, Launch>);     \
  REGISTER_KERNEL_BUILDER(                                                 \
      Name("CustomOps>" op "Grad")                                         \
          .Device(device)                                                  \
          .TypeConstraint<T>("T")                                          \
          .HostMemory("rois")                                              \
          .HostMemory("features_shape"),                                   \
      ::tensorflow::customops::roi::RoiBackwardOp<                         \
          DeviceType, T, ::tensorflow::customops::roi::kind, Launch>)

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_KERNEL_UTIL_H_
