#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call_handlers.h"

#if TFCO_XLA_CUSTOM_CALLS

#include <cstdint>
#include <vector>

#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace handlers {

ffi::Error Decode(ffi::Span<const int64_t> ints, float spatial_scale,
                  ffi::DataType type, ffi::DataType boxes_type,
                  int64_t num_rois, HandlerCall* call) {
  if (ints.size() != kNumInts || !CoreDtypeOf(type, &call->dtype) ||
      !CoreDtypeOf(boxes_type, &call->boxes_dtype) ||
      !BoxTypesOk(call->dtype, call->boxes_dtype)) {
    return ffi::Error::Internal("RoI custom call: unexpected attributes");
  }
  RoiAttrs attrs;
  attrs.kind = static_cast<RoiKind>(ints[kKind]);
  attrs.pooled_height = ints[kPooledHeight];
  attrs.pooled_width = ints[kPooledWidth];
  attrs.spatial_scale = spatial_scale;
  attrs.sampling_ratio = ints[kSamplingRatio];
  attrs.aligned = ints[kAligned] != 0;
  attrs.nchw = ints[kNchw] != 0;
  const RoiShape shape{ints[kBatch],    ints[kHeight], ints[kWidth],
                       ints[kChannels], num_rois,      ints[kOutChannels]};
  call->args = RoiArgs::Make(shape, attrs);
  return ffi::Error::Success();
}

ffi::Error RunForward(const TfcoDevice* device, const HandlerCall& call,
                      const ffi::AnyBuffer& features, const void* rois,
                      const ffi::AnyBuffer& pooled, int32_t* argmax) {
  if (call.args.shape.num_rois == 0 || pooled.element_count() == 0) {
    return ffi::Error::Success();
  }
  const auto entry = call.args.attrs.bilinear() ? TfcoRoiAlign : TfcoRoiPool;
  return FfiCoreError(entry(device, call.dtype, call.boxes_dtype, &call.args,
                            features.untyped_data(), rois,
                            pooled.untyped_data(), argmax));
}

ffi::Error RunGrad(const TfcoDevice* device, const HandlerCall& call,
                   const ffi::AnyBuffer& grads, const void* rois,
                   const int32_t* argmax, const ffi::AnyBuffer& grad_features) {
  if (grad_features.element_count() == 0) return ffi::Error::Success();
  const auto entry =
      call.args.attrs.bilinear() ? TfcoRoiAlignGrad : TfcoRoiPoolGrad;
  return FfiCoreError(entry(device, call.dtype, call.boxes_dtype, &call.args,
                            grads.untyped_data(), rois, argmax,
                            grad_features.untyped_data()));
}

ffi::Error RunGradBoxes(const TfcoDevice* device, const HandlerCall& call,
                        const ffi::AnyBuffer& grads,
                        const ffi::AnyBuffer& features, const void* rois,
                        void* grad_rois) {
  if (call.args.shape.num_rois == 0) return ffi::Error::Success();
  return FfiCoreError(TfcoRoiAlignGradBoxes(
      device, call.dtype, call.boxes_dtype, &call.args, grads.untyped_data(),
      features.untyped_data(), rois, grad_rois));
}

}  // namespace handlers
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS
