#include "tensorflow_customops/compiler/tf2xla/kernels/roi_custom_call.h"

#if TFCO_XLA_CUSTOM_CALLS

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_args.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

namespace tensorflow {
namespace customops {
namespace roi {

namespace {

// Custom-call targets. RoiPool is the only kind with an argmax, a second
// forward output and a further gradient input.
constexpr char kForward[] = "tfco_roi_forward";
constexpr char kPoolForward[] = "tfco_roi_pool_forward";
constexpr char kGrad[] = "tfco_roi_grad";
constexpr char kPoolGrad[] = "tfco_roi_pool_grad";
constexpr char kGradBoxes[] = "tfco_roi_grad_boxes";

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

FfiAttributes Attributes(const RoiAttrs& a, const RoiShape& s) {
  std::vector<int64_t> ints(kNumInts);
  ints[kKind] = static_cast<int64_t>(a.kind);
  ints[kPooledHeight] = a.pooled_height;
  ints[kPooledWidth] = a.pooled_width;
  ints[kSamplingRatio] = a.sampling_ratio;
  ints[kAligned] = a.aligned;
  ints[kNchw] = a.nchw;
  ints[kBatch] = s.batch;
  ints[kHeight] = s.height;
  ints[kWidth] = s.width;
  ints[kChannels] = s.channels;
  ints[kOutChannels] = s.out_channels;
  FfiAttributes attributes;
  attributes.Ints("ints", ints).Float("spatial_scale", a.spatial_scale);
  return attributes;
}

// What a handler knows once its attributes are decoded.
struct HandlerCall {
  RoiArgs args;
  TfcoDtype dtype;
  TfcoDtype boxes_dtype;
};

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

// The kernels, on `device`, of boxes `rois` that pass the checks. argmax is
// RoiPool's output or RoiPoolGrad's input, null for the other kinds.
ffi::Error RunForward(const TfcoDevice* device, const HandlerCall& call,
                      const ffi::AnyBuffer& features, const void* rois,
                      const ffi::AnyBuffer& pooled, int32_t* argmax) {
  if (call.args.shape.num_rois == 0 || pooled.element_count() == 0) {
    return ffi::Error::Success();
  }
  if (call.args.attrs.bilinear()) {
    return FfiCoreError(TfcoRoiAlign(device, call.dtype, call.boxes_dtype,
                                     &call.args, features.untyped_data(), rois,
                                     pooled.untyped_data()));
  }
  return FfiCoreError(TfcoRoiPool(device, call.dtype, call.boxes_dtype,
                                  &call.args, features.untyped_data(), rois,
                                  pooled.untyped_data(), argmax));
}

ffi::Error RunGrad(const TfcoDevice* device, const HandlerCall& call,
                   const ffi::AnyBuffer& grads, const void* rois,
                   const int32_t* argmax, const ffi::AnyBuffer& grad_features) {
  if (grad_features.element_count() == 0) return ffi::Error::Success();
  if (call.args.attrs.bilinear()) {
    return FfiCoreError(TfcoRoiAlignGrad(device, call.dtype, call.boxes_dtype,
                                         &call.args, grads.untyped_data(), rois,
                                         grad_features.untyped_data()));
  }
  return FfiCoreError(TfcoRoiPoolGrad(device, call.dtype, call.boxes_dtype,
                                      &call.args, grads.untyped_data(), rois,
                                      argmax, grad_features.untyped_data()));
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

// On the host: the first `num_rois` boxes are real (the rest pad a
// bounded-dynamic count) and are checked as the regular kernels check them,
// raising their errors.
ffi::Error HostCall(ffi::Span<const int64_t> ints, float spatial_scale,
                    ffi::DataType type, const ffi::AnyBuffer& rois,
                    int32_t num_rois, HandlerCall* call) {
  if (ffi::Error e = Decode(ints, spatial_scale, type, rois.element_type(),
                            num_rois, call);
      e.failure()) {
    return e;
  }
  const int64_t batch = call->args.shape.batch;
  if (call->boxes_dtype == TFCO_DOUBLE) {
    return FfiError(
        CheckRoiValues(static_cast<const double*>(rois.untyped_data()),
                       num_rois, batch, spatial_scale));
  }
  return FfiError(CheckRoiValues(static_cast<const float*>(rois.untyped_data()),
                                 num_rois, batch, spatial_scale));
}

// Zeroes the rows of `out` (rows of equal size) from `first` on: the padding
// of outputs whose rows are boxes, which XLA does not clear.
void ZeroRowsFrom(const ffi::AnyBuffer& out, int64_t first) {
  const int64_t rows = out.dimensions()[0];
  if (rows <= first) return;
  const size_t row_bytes = out.size_bytes() / rows;
  std::memset(static_cast<char*>(out.untyped_data()) + first * row_bytes, 0,
              (rows - first) * row_bytes);
}

ffi::Error HostForward(ffi::ThreadPool pool, const ffi::AnyBuffer& features,
                       ffi::AnyBuffer rois, int32_t num_rois,
                       const ffi::AnyBuffer& pooled,
                       const ffi::AnyBuffer* argmax,
                       ffi::Span<const int64_t> ints, float spatial_scale) {
  HandlerCall call;
  if (ffi::Error e = HostCall(ints, spatial_scale, features.element_type(),
                              rois, num_rois, &call);
      e.failure()) {
    return e;
  }
  ZeroRowsFrom(pooled, num_rois);
  int32_t* argmax_data = nullptr;
  if (argmax != nullptr) {
    // -1 (no pixel) in the padding, as in an empty bin.
    argmax_data = static_cast<int32_t*>(argmax->untyped_data());
    const int64_t size = argmax->element_count();
    std::fill(argmax_data + size / argmax->dimensions()[0] * num_rois,
              argmax_data + size, -1);
  }
  const FfiCoreDevice device(pool);
  return RunForward(device.get(), call, features, rois.untyped_data(), pooled,
                    argmax_data);
}

ffi::Error HostGrad(ffi::ThreadPool pool, const ffi::AnyBuffer& grads,
                    ffi::AnyBuffer rois, const ffi::AnyBuffer* argmax,
                    int32_t num_rois, const ffi::AnyBuffer& grad_features,
                    ffi::Span<const int64_t> ints, float spatial_scale) {
  HandlerCall call;
  if (ffi::Error e = HostCall(ints, spatial_scale, grads.element_type(), rois,
                              num_rois, &call);
      e.failure()) {
    return e;
  }
  const int32_t* argmax_data = nullptr;
  if (argmax != nullptr) {
    argmax_data = static_cast<const int32_t*>(argmax->untyped_data());
    const int64_t size = static_cast<int64_t>(argmax->element_count()) /
                         std::max<int64_t>(argmax->dimensions()[0], 1) *
                         num_rois;
    const RoiShape& s = call.args.shape;
    if (!ArgmaxInRange(argmax_data, 0, size, s.height * s.width)) {
      return FfiError(ArgmaxError(argmax_data, size, s.height * s.width));
    }
  }
  const FfiCoreDevice device(pool);
  return RunGrad(device.get(), call, grads, rois.untyped_data(), argmax_data,
                 grad_features);
}

ffi::Error HostGradBoxes(ffi::ThreadPool pool, ffi::AnyBuffer grads,
                         ffi::AnyBuffer features, ffi::AnyBuffer rois,
                         ffi::BufferR0<ffi::S32> count,
                         ffi::Result<ffi::AnyBuffer> grad_rois,
                         ffi::Span<const int64_t> ints, float spatial_scale) {
  const int32_t num_rois = *count.typed_data();
  HandlerCall call;
  if (ffi::Error e = HostCall(ints, spatial_scale, features.element_type(),
                              rois, num_rois, &call);
      e.failure()) {
    return e;
  }
  ZeroRowsFrom(*grad_rois, num_rois);
  const FfiCoreDevice device(pool);
  return RunGradBoxes(device.get(), call, grads, features, rois.untyped_data(),
                      grad_rois->untyped_data());
}

#if TFCO_XLA_FFI

// Last in every handler's binding: the attributes of Attributes().
template <typename Binding>
auto WithAttributes(Binding binding) {
  return std::move(binding)
      .template Attr<ffi::Span<const int64_t>>("ints")
      .template Attr<float>("spatial_scale");
}

// What every handler of a target takes after its context (the thread pool
// on the host, XLA's stream on CUDA): the operands of EmitCustomCall, the
// boxes' count last, and its results. TensorOperands serves the forward ops
// and feature gradients of every kind but RoiPool (one tensor and the boxes).
template <typename Binding>
auto TensorOperands(Binding binding) {
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::BufferR0<ffi::S32>>()
      .template Ret<ffi::AnyBuffer>();
}

template <typename Binding>
auto PoolForwardOperands(Binding binding) {
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::BufferR0<ffi::S32>>()
      .template Ret<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>();
}

template <typename Binding>
auto PoolGradOperands(Binding binding) {
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::BufferR0<ffi::S32>>()
      .template Ret<ffi::AnyBuffer>();
}

template <typename Binding>
auto GradBoxesOperands(Binding binding) {
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::BufferR0<ffi::S32>>()
      .template Ret<ffi::AnyBuffer>();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiForwardHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer features, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32> count, ffi::Result<ffi::AnyBuffer> pooled,
       ffi::Span<const int64_t> ints, float spatial_scale) {
      return HostForward(pool, features, rois, *count.typed_data(), *pooled,
                         nullptr, ints, spatial_scale);
    },
    WithAttributes(TensorOperands(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiPoolForwardHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer features, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32> count, ffi::Result<ffi::AnyBuffer> pooled,
       ffi::Result<ffi::AnyBuffer> argmax, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return HostForward(pool, features, rois, *count.typed_data(), *pooled,
                         &*argmax, ints, spatial_scale);
    },
    WithAttributes(
        PoolForwardOperands(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiGradHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer grads, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32> count, ffi::Result<ffi::AnyBuffer> grad_features,
       ffi::Span<const int64_t> ints, float spatial_scale) {
      return HostGrad(pool, grads, rois, nullptr, *count.typed_data(),
                      *grad_features, ints, spatial_scale);
    },
    WithAttributes(TensorOperands(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiPoolGradHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer grads, ffi::AnyBuffer rois,
       ffi::AnyBuffer argmax, ffi::BufferR0<ffi::S32> count,
       ffi::Result<ffi::AnyBuffer> grad_features, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return HostGrad(pool, grads, rois, &argmax, *count.typed_data(),
                      *grad_features, ints, spatial_scale);
    },
    WithAttributes(PoolGradOperands(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiGradBoxesHandler, HostGradBoxes,
    WithAttributes(GradBoxesOperands(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

TFCO_REGISTER_CPU_FFI_HANDLER(kForward, TfcoRoiForwardHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kPoolForward, TfcoRoiPoolForwardHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kGrad, TfcoRoiGradHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kPoolGrad, TfcoRoiPoolGradHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kGradBoxes, TfcoRoiGradBoxesHandler);

#if TFCO_CUDA

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

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiForwardGpuHandler,
    [](void* stream, ffi::AnyBuffer features, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32>, ffi::Result<ffi::AnyBuffer> pooled,
       ffi::Result<ffi::AnyBuffer> checked, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return OnGpu(
          stream, ints, spatial_scale, features.element_type(), rois,
          checked->untyped_data(),
          [&](const TfcoDevice* d, const HandlerCall& call, const void* boxes) {
            return RunForward(d, call, features, boxes, *pooled, nullptr);
          });
    },
    WithAttributes(WithScratch(
        TensorOperands(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiPoolForwardGpuHandler,
    [](void* stream, ffi::AnyBuffer features, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32>, ffi::Result<ffi::AnyBuffer> pooled,
       ffi::Result<ffi::AnyBuffer> argmax, ffi::Result<ffi::AnyBuffer> checked,
       ffi::Span<const int64_t> ints, float spatial_scale) {
      return OnGpu(
          stream, ints, spatial_scale, features.element_type(), rois,
          checked->untyped_data(),
          [&](const TfcoDevice* d, const HandlerCall& call, const void* boxes) {
            return RunForward(d, call, features, boxes, *pooled,
                              static_cast<int32_t*>(argmax->untyped_data()));
          });
    },
    WithAttributes(WithScratch(PoolForwardOperands(
        ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiGradGpuHandler,
    [](void* stream, ffi::AnyBuffer grads, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32>, ffi::Result<ffi::AnyBuffer> grad_features,
       ffi::Result<ffi::AnyBuffer> checked, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return OnGpu(
          stream, ints, spatial_scale, grads.element_type(), rois,
          checked->untyped_data(),
          [&](const TfcoDevice* d, const HandlerCall& call, const void* boxes) {
            return RunGrad(d, call, grads, boxes, nullptr, *grad_features);
          });
    },
    WithAttributes(WithScratch(
        TensorOperands(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))));

// The GPU kernel skips argmax entries that are not a pixel of the map.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiPoolGradGpuHandler,
    [](void* stream, ffi::AnyBuffer grads, ffi::AnyBuffer rois,
       ffi::AnyBuffer argmax, ffi::BufferR0<ffi::S32>,
       ffi::Result<ffi::AnyBuffer> grad_features,
       ffi::Result<ffi::AnyBuffer> checked, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return OnGpu(
          stream, ints, spatial_scale, grads.element_type(), rois,
          checked->untyped_data(),
          [&](const TfcoDevice* d, const HandlerCall& call, const void* boxes) {
            return RunGrad(d, call, grads, boxes,
                           static_cast<const int32_t*>(argmax.untyped_data()),
                           *grad_features);
          });
    },
    WithAttributes(WithScratch(
        PoolGradOperands(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiGradBoxesGpuHandler,
    [](void* stream, ffi::AnyBuffer grads, ffi::AnyBuffer features,
       ffi::AnyBuffer rois, ffi::BufferR0<ffi::S32>,
       ffi::Result<ffi::AnyBuffer> grad_rois,
       ffi::Result<ffi::AnyBuffer> checked, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return OnGpu(
          stream, ints, spatial_scale, features.element_type(), rois,
          checked->untyped_data(),
          [&](const TfcoDevice* d, const HandlerCall& call, const void* boxes) {
            return RunGradBoxes(d, call, grads, features, boxes,
                                grad_rois->untyped_data());
          });
    },
    WithAttributes(WithScratch(GradBoxesOperands(
        ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))));

TFCO_REGISTER_GPU_FFI_HANDLER(kForward, TfcoRoiForwardGpuHandler);
TFCO_REGISTER_GPU_FFI_HANDLER(kPoolForward, TfcoRoiPoolForwardGpuHandler);
TFCO_REGISTER_GPU_FFI_HANDLER(kGrad, TfcoRoiGradGpuHandler);
TFCO_REGISTER_GPU_FFI_HANDLER(kPoolGrad, TfcoRoiPoolGradGpuHandler);
TFCO_REGISTER_GPU_FFI_HANDLER(kGradBoxes, TfcoRoiGradBoxesGpuHandler);

#endif  // TFCO_CUDA

#else  // TFCO_XLA_FFI

// Legacy calls (legacy_custom_call.h) of the same operands, results and
// attributes as the typed-FFI handlers above, on the host.

int32_t Count(const ffi::AnyBuffer& count) {
  return *static_cast<const int32_t*>(count.untyped_data());
}

void TfcoRoiForwardLegacy(void* out, const void** in, const char* opaque,
                          size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 3, 1,
                            {"ints", "spatial_scale"});
  legacy::Finish(status,
                 f.ok() ? HostForward(f.pool(), f.Arg(0), f.Arg(1),
                                      Count(f.Arg(2)), f.Ret(0), nullptr,
                                      f.Ints("ints"), f.Float("spatial_scale"))
                        : f.error());
}

void TfcoRoiPoolForwardLegacy(void* out, const void** in, const char* opaque,
                              size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 3, 2,
                            {"ints", "spatial_scale"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  const ffi::AnyBuffer argmax = f.Ret(1);
  legacy::Finish(status, HostForward(f.pool(), f.Arg(0), f.Arg(1),
                                     Count(f.Arg(2)), f.Ret(0), &argmax,
                                     f.Ints("ints"), f.Float("spatial_scale")));
}

void TfcoRoiGradLegacy(void* out, const void** in, const char* opaque,
                       size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 3, 1,
                            {"ints", "spatial_scale"});
  legacy::Finish(
      status,
      f.ok() ? HostGrad(f.pool(), f.Arg(0), f.Arg(1), nullptr, Count(f.Arg(2)),
                        f.Ret(0), f.Ints("ints"), f.Float("spatial_scale"))
             : f.error());
}

void TfcoRoiPoolGradLegacy(void* out, const void** in, const char* opaque,
                           size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 4, 1,
                            {"ints", "spatial_scale"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  const ffi::AnyBuffer argmax = f.Arg(2);
  legacy::Finish(
      status, HostGrad(f.pool(), f.Arg(0), f.Arg(1), &argmax, Count(f.Arg(3)),
                       f.Ret(0), f.Ints("ints"), f.Float("spatial_scale")));
}

void TfcoRoiGradBoxesLegacy(void* out, const void** in, const char* opaque,
                            size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 4, 1,
                            {"ints", "spatial_scale"});
  legacy::Finish(
      status, f.ok() ? HostGradBoxes(f.pool(), f.Arg(0), f.Arg(1), f.Arg(2),
                                     ffi::BufferR0<ffi::S32>(f.Arg(3)),
                                     ffi::Result<ffi::AnyBuffer>(f.Ret(0)),
                                     f.Ints("ints"), f.Float("spatial_scale"))
                     : f.error());
}

TFCO_REGISTER_CPU_LEGACY_HANDLER(kForward, TfcoRoiForwardLegacy);
TFCO_REGISTER_CPU_LEGACY_HANDLER(kPoolForward, TfcoRoiPoolForwardLegacy);
TFCO_REGISTER_CPU_LEGACY_HANDLER(kGrad, TfcoRoiGradLegacy);
TFCO_REGISTER_CPU_LEGACY_HANDLER(kPoolGrad, TfcoRoiPoolGradLegacy);
TFCO_REGISTER_CPU_LEGACY_HANDLER(kGradBoxes, TfcoRoiGradBoxesLegacy);

#endif  // TFCO_XLA_FFI

}  // namespace

RoiCustomCall::RoiCustomCall(OpKernelConstruction* context)
    : choice_(context, /*gpu_handlers=*/true) {}

bool RoiCustomCall::Compile(XlaOpKernelContext* context, RoiOpRole role,
                            const RoiAttrs& attrs,
                            const RoiShape& shape) const {
  if (!choice_.Use()) return false;
  const bool pool = attrs.kind == RoiKind::kPool;
  std::vector<xla::XlaOp> operands;
  std::vector<int> rows;  // operands whose first dimension is the boxes'
  int boxes = 0;
  std::vector<CustomCallResult> results;
  const xla::PrimitiveType type =
      context->input_xla_type(role == RoiOpRole::kGradBoxes ? 1 : 0);
  const xla::PrimitiveType boxes_type =
      context->input_xla_type(role == RoiOpRole::kGradBoxes ? 2 : 1);
  std::vector<int64_t> pooled_dims = {shape.num_rois, attrs.pooled_height,
                                      attrs.pooled_width, shape.out_channels};
  if (attrs.nchw) {
    pooled_dims = {shape.num_rois, shape.out_channels, attrs.pooled_height,
                   attrs.pooled_width};
  }
  const char* target = nullptr;
  switch (role) {
    case RoiOpRole::kForward:
      operands = {context->Input(0), context->Input(1)};
      rows = {1};
      boxes = 1;
      results.push_back({type, pooled_dims, true});
      if (pool) results.push_back({xla::S32, pooled_dims, true});
      target = pool ? kPoolForward : kForward;
      break;
    case RoiOpRole::kGrad: {
      operands = {context->Input(0), context->Input(1)};
      rows = {0, 1};
      if (pool) {
        operands.push_back(context->Input(2));
        rows.push_back(2);
      }
      boxes = 1;
      std::vector<int64_t> features_dims = {shape.batch, shape.height,
                                            shape.width, shape.channels};
      if (attrs.nchw) {
        features_dims = {shape.batch, shape.channels, shape.height,
                         shape.width};
      }
      results.push_back({type, features_dims, false});
      target = pool ? kPoolGrad : kGrad;
      break;
    }
    case RoiOpRole::kGradBoxes:
      operands = {context->Input(0), context->Input(1), context->Input(2)};
      rows = {0, 2};
      boxes = 2;
      results.push_back({boxes_type, {shape.num_rois, 5}, true});
      target = kGradBoxes;
      break;
  }
  if (HasOtherDynamicDimensions(context, operands, rows)) return false;
  if (choice_.OnGpu()) {
    // The GPU handlers cannot read a dynamic count (it lives on the device).
    if (HasOtherDynamicDimensions(context, operands, {})) return false;
    // Their scratch: the checked boxes (GpuCall).
    results.push_back({boxes_type, {shape.num_rois, 5}, false});
  }
  const std::vector<xla::XlaOp> outputs = EmitCustomCall(
      context, target, operands, boxes, results, Attributes(attrs, shape));
  for (int i = 0; i < context->num_outputs(); ++i) {
    context->SetOutput(i, outputs[i]);
  }
  return true;
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#else  // TFCO_XLA_CUSTOM_CALLS

namespace tensorflow {
namespace customops {
namespace roi {

RoiCustomCall::RoiCustomCall(OpKernelConstruction*) {}

bool RoiCustomCall::Compile(XlaOpKernelContext*, RoiOpRole, const RoiAttrs&,
                            const RoiShape&) const {
  return false;
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS
