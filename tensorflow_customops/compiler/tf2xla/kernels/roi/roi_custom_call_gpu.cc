// The RoI custom calls' handlers on CUDA (typed FFI, TensorFlow 2.20 and
// newer, --config=cuda): they run the portable kernels on XLA's stream.

#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call_handlers.h"

#if TFCO_XLA_FFI && TFCO_CUDA

#include <cstdint>
#include <utility>

#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace handlers {
namespace {

// The GPU handlers' further result: their scratch, the checked boxes
// (GpuCall).
template <typename Binding>
auto WithScratch(Binding binding) {
  return std::move(binding).template Ret<ffi::AnyBuffer>();
}

// On a GPU the boxes live in device memory, where a handler can neither
// raise on them nor read them without waiting for the stream: they are
// copied to `checked`, the call's last result, with every box that fails the
// checks replaced by roi::NullBox (zeros, no gradient), on XLA's stream.
// Their count is static (the lowering keeps boxes of dynamic count on HLO).
ffi::Error GpuCall(const TfcoDevice* device, ffi::Span<const int64_t> ints,
                   float spatial_scale, ffi::DataType type,
                   const ffi::AnyBuffer& rois, void* checked,
                   HandlerCall* call) {
  const int64_t num_rois = rois.dimensions()[0];
  if (ffi::Error e = Decode(ints, spatial_scale, type, rois.element_type(),
                            num_rois, call);
      e.failure()) {
    return e;
  }
  return FfiCoreError(TfcoRoiCheckBoxes(device, call->boxes_dtype, num_rois,
                                        call->args.shape.batch, spatial_scale,
                                        rois.untyped_data(), checked));
}

// Runs run(device, call, checked) on XLA's stream `stream` once GpuCall has
// checked the boxes into `checked`.
template <typename Run>
ffi::Error OnGpu(void* stream, ffi::Span<const int64_t> ints,
                 float spatial_scale, ffi::DataType type,
                 const ffi::AnyBuffer& rois, void* checked, Run run) {
  const TfcoDevice device = StreamDevice(stream);
  HandlerCall call;
  if (ffi::Error e =
          GpuCall(&device, ints, spatial_scale, type, rois, checked, &call);
      e.failure()) {
    return e;
  }
  return run(&device, call, static_cast<const void*>(checked));
}

// Defines the CUDA handler `symbol` and registers it for `target`. Its
// parameters after the stream are `...`, those of the binding
// Operands<tensors, results> (the boxes named `rois`), then the scratch
// `checked`; `run` calls the kernels given the device `d`, the decoded `call`
// and the checked `boxes`, for the tensor `typed` whose type the call takes.
#define TFCO_ROI_GPU_HANDLER(target, symbol, tensors, results, typed, run,    \
                             ...)                                             \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                              \
      symbol,                                                                 \
      [](void* stream, __VA_ARGS__, ffi::Result<ffi::AnyBuffer> checked,      \
         ffi::Span<const int64_t> ints, float spatial_scale) {                \
        return OnGpu(stream, ints, spatial_scale, typed.element_type(), rois, \
                     checked->untyped_data(),                                 \
                     [&](const TfcoDevice* d, const HandlerCall& call,        \
                         const void* boxes) { return run; });                 \
      },                                                                      \
      WithAttributes(WithScratch(Operands<tensors, results>(                  \
          ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))));             \
  TFCO_REGISTER_GPU_FFI_HANDLER(target, symbol)

TFCO_ROI_GPU_HANDLER(kForward, TfcoRoiForwardGpuHandler, 2, 1, features,
                     RunForward(d, call, features, boxes, *pooled, nullptr),
                     ffi::AnyBuffer features, ffi::AnyBuffer rois,
                     ffi::BufferR0<ffi::S32>,
                     ffi::Result<ffi::AnyBuffer> pooled);

TFCO_ROI_GPU_HANDLER(kPoolForward, TfcoRoiPoolForwardGpuHandler, 2, 2, features,
                     RunForward(d, call, features, boxes, *pooled,
                                static_cast<int32_t*>(argmax->untyped_data())),
                     ffi::AnyBuffer features, ffi::AnyBuffer rois,
                     ffi::BufferR0<ffi::S32>,
                     ffi::Result<ffi::AnyBuffer> pooled,
                     ffi::Result<ffi::AnyBuffer> argmax);

TFCO_ROI_GPU_HANDLER(kGrad, TfcoRoiGradGpuHandler, 2, 1, grads,
                     RunGrad(d, call, grads, boxes, nullptr, *grad_features),
                     ffi::AnyBuffer grads, ffi::AnyBuffer rois,
                     ffi::BufferR0<ffi::S32>,
                     ffi::Result<ffi::AnyBuffer> grad_features);

// The GPU kernel skips argmax entries that are not a pixel of the map.
TFCO_ROI_GPU_HANDLER(kPoolGrad, TfcoRoiPoolGradGpuHandler, 3, 1, grads,
                     RunGrad(d, call, grads, boxes,
                             static_cast<const int32_t*>(argmax.untyped_data()),
                             *grad_features),
                     ffi::AnyBuffer grads, ffi::AnyBuffer rois,
                     ffi::AnyBuffer argmax, ffi::BufferR0<ffi::S32>,
                     ffi::Result<ffi::AnyBuffer> grad_features);

TFCO_ROI_GPU_HANDLER(kGradBoxes, TfcoRoiGradBoxesGpuHandler, 3, 1, features,
                     RunGradBoxes(d, call, grads, features, boxes,
                                  grad_rois->untyped_data()),
                     ffi::AnyBuffer grads, ffi::AnyBuffer features,
                     ffi::AnyBuffer rois, ffi::BufferR0<ffi::S32>,
                     ffi::Result<ffi::AnyBuffer> grad_rois);

#undef TFCO_ROI_GPU_HANDLER

}  // namespace
}  // namespace handlers
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_FFI && TFCO_CUDA
