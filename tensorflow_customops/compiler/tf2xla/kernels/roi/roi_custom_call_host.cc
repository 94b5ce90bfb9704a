// The RoI custom calls' handlers on the host: typed FFI from TensorFlow 2.20,
// legacy custom calls on 2.12 to 2.19 (custom_call.h). They check the boxes
// (and argmax) as the regular kernels do, raising their errors, and run the
// portable kernels on TensorFlow's intra-op pool.

#include "tensorflow_customops/compiler/tf2xla/custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call_handlers.h"

#if TFCO_XLA_CUSTOM_CALLS

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace handlers {
namespace {

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

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiForwardHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer features, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32> count, ffi::Result<ffi::AnyBuffer> pooled,
       ffi::Span<const int64_t> ints, float spatial_scale) {
      return HostForward(pool, features, rois, *count.typed_data(), *pooled,
                         nullptr, ints, spatial_scale);
    },
    WithAttributes(Operands<2, 1>(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiPoolForwardHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer features, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32> count, ffi::Result<ffi::AnyBuffer> pooled,
       ffi::Result<ffi::AnyBuffer> argmax, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return HostForward(pool, features, rois, *count.typed_data(), *pooled,
                         &*argmax, ints, spatial_scale);
    },
    WithAttributes(Operands<2, 2>(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiGradHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer grads, ffi::AnyBuffer rois,
       ffi::BufferR0<ffi::S32> count, ffi::Result<ffi::AnyBuffer> grad_features,
       ffi::Span<const int64_t> ints, float spatial_scale) {
      return HostGrad(pool, grads, rois, nullptr, *count.typed_data(),
                      *grad_features, ints, spatial_scale);
    },
    WithAttributes(Operands<2, 1>(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiPoolGradHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer grads, ffi::AnyBuffer rois,
       ffi::AnyBuffer argmax, ffi::BufferR0<ffi::S32> count,
       ffi::Result<ffi::AnyBuffer> grad_features, ffi::Span<const int64_t> ints,
       float spatial_scale) {
      return HostGrad(pool, grads, rois, &argmax, *count.typed_data(),
                      *grad_features, ints, spatial_scale);
    },
    WithAttributes(Operands<3, 1>(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiGradBoxesHandler, HostGradBoxes,
    WithAttributes(Operands<3, 1>(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

TFCO_REGISTER_CPU_FFI_HANDLER(kForward, TfcoRoiForwardHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kPoolForward, TfcoRoiPoolForwardHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kGrad, TfcoRoiGradHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kPoolGrad, TfcoRoiPoolGradHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kGradBoxes, TfcoRoiGradBoxesHandler);

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
}  // namespace handlers
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS
