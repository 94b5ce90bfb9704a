// What the RoI ops' custom calls share between their lowering
// (roi_custom_call.cc) and their handlers on the host (roi_custom_call_host.cc)
// and on CUDA (roi_custom_call_gpu.cc): the targets, the layout of the
// attributes, the decoded call and the calls into the portable kernels. Only
// those files include it. No TensorFlow header (ffi_handler.h): the CUDA
// handlers link into tools/gpu_check.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_CUSTOM_CALL_HANDLERS_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_CUSTOM_CALL_HANDLERS_H_

#include "tensorflow_customops/compiler/tf2xla/ffi_handler.h"

#if TFCO_XLA_CUSTOM_CALLS

#include <cstdint>
#include <utility>

#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace handlers {

// Custom-call targets. RoiPool is the only kind with an argmax, a second
// forward output and a further gradient input.
inline constexpr char kForward[] = "tfco_roi_forward";
inline constexpr char kPoolForward[] = "tfco_roi_pool_forward";
inline constexpr char kGrad[] = "tfco_roi_grad";
inline constexpr char kPoolGrad[] = "tfco_roi_pool_grad";
inline constexpr char kGradBoxes[] = "tfco_roi_grad_boxes";

// The handlers' attributes: `ints` holds the attrs and the feature sizes in
// this order, `spatial_scale` the scale.
enum Int {
  kKind,
  kPooledHeight,
  kPooledWidth,
  kSamplingRatio,
  kAligned,
  kNchw,
  kBatch,
  kHeight,
  kWidth,
  kChannels,
  kOutChannels,
  kNumInts
};

// What a handler knows once its attributes are decoded.
struct HandlerCall {
  RoiArgs args;
  TfcoDtype dtype;
  TfcoDtype boxes_dtype;
};

// Decodes the attributes and types of a call of `num_rois` boxes into `call`.
ffi::Error Decode(ffi::Span<const int64_t> ints, float spatial_scale,
                  ffi::DataType type, ffi::DataType boxes_type,
                  int64_t num_rois, HandlerCall* call);

// The kernels, on `device`, of boxes `rois` that pass the checks. argmax is
// RoiPool's output or RoiPoolGrad's input, null for the other kinds.
ffi::Error RunForward(const TfcoDevice* device, const HandlerCall& call,
                      const ffi::AnyBuffer& features, const void* rois,
                      const ffi::AnyBuffer& pooled, int32_t* argmax);
ffi::Error RunGrad(const TfcoDevice* device, const HandlerCall& call,
                   const ffi::AnyBuffer& grads, const void* rois,
                   const int32_t* argmax, const ffi::AnyBuffer& grad_features);
ffi::Error RunGradBoxes(const TfcoDevice* device, const HandlerCall& call,
                        const ffi::AnyBuffer& grads,
                        const ffi::AnyBuffer& features, const void* rois,
                        void* grad_rois);

#if TFCO_XLA_FFI

// Last in every handler's binding: the attributes of Attributes().
template <typename Binding>
auto WithAttributes(Binding binding) {
  return std::move(binding)
      .template Attr<ffi::Span<const int64_t>>("ints")
      .template Attr<float>("spatial_scale");
}

// What every handler of a target takes after its context (the thread pool
// on the host, XLA's stream on CUDA): the operands of EmitCustomCall,
// `kTensors` tensors and the boxes' count last, then `kResults` results.
// Operands<2, 1> serves the forward ops and feature gradients of every kind
// but RoiPool; RoiPool's forward has two results (pooled, argmax), its
// gradient and the box gradients three tensors.
template <int kTensors, int kResults, typename Binding>
auto Operands(Binding binding) {
  return WithBuffers<0, kResults>(WithBuffers<kTensors, 0>(std::move(binding))
                                      .template Arg<ffi::BufferR0<ffi::S32>>());
}

#endif  // TFCO_XLA_FFI

}  // namespace handlers
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_CUSTOM_CALL_HANDLERS_H_
