// Host-side attribute parsing and input validation shared by the RoI kernels.
// Every check runs before a kernel touches memory, and every failure is an
// InvalidArgument naming the argument.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_KERNEL_UTIL_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_KERNEL_UTIL_H_

#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/core/kernels/roi_ops_common.h"

namespace tensorflow {
namespace roi {

// Attributes of a RoI op and its gradient.
struct RoiAttrs {
  int pooled_height = 0;
  int pooled_width = 0;
  float spatial_scale = 1.0f;
  int sampling_ratio = 0;  // align ops only
  bool aligned = false;    // align ops only
  bool nchw = false;
  bool position_sensitive = false;
  bool align = false;  // bilinear sampling (RoiAlign, PsRoiAlign)
};

enum class OpKind { kPool, kAlign, kPsPool, kPsAlign };

// Reads and checks the attrs `kind` has (spatial_scale finite and > 0,
// sampling_ratio <= kMaxSamplingRatio). pooled_height, pooled_width (>= 1)
// and data_format (NHWC or NCHW) are already checked against the OpDef.
absl::Status ReadRoiAttrs(OpKernelConstruction* context, OpKind kind,
                          RoiAttrs* attrs);

// What a kernel knows once its inputs are validated and outputs allocated.
struct RoiCall {
  RoiShape shape;
  Tensor rois_scratch;           // device copy of rois (GPU kernels only)
  float* device_rois = nullptr;  // its data
  bool empty = false;            // the outputs have no elements
};

// Validates a forward kernel's features (input 0) and rois (input 1), and for
// the align ops the adaptive sampling grid (in double precision if
// `double_precision`, as the kernel computes it); allocates every output with
// the pooled shape and, if `on_gpu`, the device copy of rois.
absl::Status PrepareForward(OpKernelContext* context, const RoiAttrs& attrs,
                            bool double_precision, bool on_gpu, RoiCall* call,
                            Tensor** outputs);

// The same for a gradient kernel: grads (input 0, with the pooled shape),
// rois (input 1) and features_shape (input `features_shape_input`); allocates
// the feature gradient (output 0).
absl::Status PrepareBackward(OpKernelContext* context, const RoiAttrs& attrs,
                             int features_shape_input, bool double_precision,
                             bool on_gpu, RoiCall* call,
                             Tensor** grad_features);

// The CPU transposes of ReadFeaturesChannelsLast and
// WriteFeaturesChannelsLast: an NHWC copy of the 4-D NCHW tensor
// `nchw`; an uninitialised NHWC tensor for the NCHW `nchw`; and `nhwc` copied
// into the existing NCHW `nchw`. For the feature types of the RoI kernels.
absl::Status ToChannelsLast(OpKernelContext* context, const Tensor& nchw,
                            Tensor* nhwc);
absl::Status AllocateChannelsLast(OpKernelContext* context, const Tensor& nchw,
                                  Tensor* nhwc);
absl::Status ToChannelsFirst(OpKernelContext* context, const Tensor& nhwc,
                             Tensor* nchw);

// The rois of batch image n are order[begin[n]] .. order[begin[n + 1] - 1],
// in increasing roi index: what a backward pass that shards over images needs
// to accumulate in a fixed order.
struct RoisByImage {
  std::vector<int64_t> order;
  std::vector<int64_t> begin;
};
RoisByImage GroupRoisByImage(const float* rois, int64_t num_rois,
                             int64_t batch);

// Runs a CPU backward pass deterministically and in parallel. Work item
// (image n, block of output channels) calls
//   body(n, c_begin, c_end, A* image_grad)
// which adds into image n's gradient (laid out as the features) for output
// channels [c_begin, c_end) only: as every output channel maps to its own
// input channels, no two items write the same element, and each element sums
// its contributions in the order the body visits them, whatever the thread
// count. Half and bfloat16 gradients accumulate in float and round once.
// Requires EIGEN_USE_THREADS.
template <typename T, typename Body>
void ParallelBackward(const Eigen::ThreadPoolDevice& d, const RoiShape& s,
                      const Layout& features_layout, int64_t cost_per_channel,
                      T* grad_features, const Body& body) {
  typedef typename AccumulatorType<T>::type A;
  const int64_t size = s.batch * s.height * s.width * s.channels;
  constexpr bool kSeparateBuffer = !std::is_same<T, A>::value;
  std::vector<A> buffer(kSeparateBuffer ? size : 0);
  A* out =
      kSeparateBuffer ? buffer.data() : reinterpret_cast<A*>(grad_features);
  std::fill(out, out + size, A(0));
  // Every item recomputes its boxes' sample weights, so blocks are as wide
  // as four items per thread allow.
  const int64_t wanted = (4 * std::max(d.numThreads(), 1) + s.batch - 1) /
                         std::max<int64_t>(s.batch, 1);
  const int64_t block = std::max<int64_t>(
      1, (s.out_channels + wanted - 1) / std::max<int64_t>(wanted, 1));
  const int64_t blocks = (s.out_channels + block - 1) / block;
  d.parallelFor(
      s.batch * blocks,
      Eigen::TensorOpCost(cost_per_channel * block, cost_per_channel * block,
                          cost_per_channel * block),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t n = item / blocks;
          const int64_t c_begin = item % blocks * block;
          const int64_t c_end = std::min(c_begin + block, s.out_channels);
          body(n, c_begin, c_end, out + n * features_layout.n_stride);
        }
      });
  if (kSeparateBuffer) {
    d.parallelFor(size, Eigen::TensorOpCost(sizeof(A), sizeof(T), 1),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                      grad_features[i] = static_cast<T>(buffer[i]);
                    }
                  });
  }
}

// Layouts of the feature map and of the pooled tensor.
inline Layout FeatureLayout(const RoiShape& s, const RoiAttrs& a) {
  return Layout::Make(a.nchw, s.height, s.width, s.channels);
}
inline Layout PooledLayout(const RoiShape& s, const RoiAttrs& a) {
  return Layout::Make(a.nchw, a.pooled_height, a.pooled_width, s.out_channels);
}

// NCHW kernels on CPU run with their feature map in NHWC, where channels are
// contiguous and the loops vectorise; pooled tensors keep their layout. Every
// element sees the same arithmetic in the same order, so the bits do not
// change. Elsewhere (NHWC, GPU) `run` gets the tensors as they are.
//
// Forward: run(const Layout& features_layout, const Tensor& features) reads
// an NHWC copy of `features`.
template <typename Run>
absl::Status ReadFeaturesChannelsLast(OpKernelContext* context,
                                      const RoiShape& shape,
                                      const RoiAttrs& attrs, bool on_gpu,
                                      const Tensor& features, const Run& run) {
  if (on_gpu || !attrs.nchw) {
    run(FeatureLayout(shape, attrs), features);
    return absl::OkStatus();
  }
  Tensor copy;
  TF_RETURN_IF_ERROR(ToChannelsLast(context, features, &copy));
  run(Layout::Make(false, shape.height, shape.width, shape.channels), copy);
  return absl::OkStatus();
}

// Backward: run(const Layout& features_layout, Tensor* grad_features) writes
// an NHWC gradient, transposed into `grad_features` afterwards.
template <typename Run>
absl::Status WriteFeaturesChannelsLast(OpKernelContext* context,
                                       const RoiShape& shape,
                                       const RoiAttrs& attrs, bool on_gpu,
                                       Tensor* grad_features, const Run& run) {
  if (on_gpu || !attrs.nchw) {
    run(FeatureLayout(shape, attrs), grad_features);
    return absl::OkStatus();
  }
  Tensor copy;
  TF_RETURN_IF_ERROR(AllocateChannelsLast(context, *grad_features, &copy));
  run(Layout::Make(false, shape.height, shape.width, shape.channels), &copy);
  return ToChannelsFirst(context, copy, grad_features);
}

}  // namespace roi
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_KERNEL_UTIL_H_
