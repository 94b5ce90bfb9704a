#include "tensorflow_customops/compiler/tf2xla/kernels/deform_conv2d/deform_conv2d_custom_call_handlers.h"

#include <vector>

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

std::vector<int64_t> Ints(const TfcoDeformConv2dArgs& a) {
  return {a.n,
          a.h,
          a.w,
          a.c,
          a.kh,
          a.kw,
          a.o,
          a.ho,
          a.wo,
          a.stride_h,
          a.stride_w,
          a.dilation_h,
          a.dilation_w,
          a.pad_top,
          a.pad_left,
          a.groups,
          a.offset_groups,
          a.nchw,
          a.use_mask};
}

#if TFCO_XLA_CUSTOM_CALLS

namespace {

ffi::Error Decode(ffi::Span<const int64_t> ints, ffi::DataType type,
                  TfcoDeformConv2dArgs* a, TfcoDtype* dtype) {
  if (ints.size() != 19 || !CoreDtypeOf(type, dtype)) {
    return ffi::Error::Internal(
        "DeformableConv2d custom call: unexpected attributes");
  }
  *a = TfcoDeformConv2dArgs{ints[0],
                            ints[1],
                            ints[2],
                            ints[3],
                            ints[4],
                            ints[5],
                            ints[6],
                            ints[7],
                            ints[8],
                            ints[9],
                            ints[10],
                            ints[11],
                            ints[12],
                            ints[13],
                            ints[14],
                            ints[15],
                            ints[16],
                            static_cast<int>(ints[17]),
                            static_cast<int>(ints[18])};
  return ffi::Error::Success();
}

ffi::Error Forward(const TfcoDevice* device, const ffi::AnyBuffer& input,
                   const ffi::AnyBuffer& filter, const ffi::AnyBuffer& offset,
                   const ffi::AnyBuffer& mask, const ffi::AnyBuffer& output,
                   ffi::Span<const int64_t> ints) {
  TfcoDeformConv2dArgs args;
  TfcoDtype dtype;
  if (ffi::Error e = Decode(ints, input.element_type(), &args, &dtype);
      e.failure()) {
    return e;
  }
  if (output.element_count() == 0) return ffi::Error::Success();
  return FfiCoreError(TfcoDeformableConv2d(
      device, dtype, &args, input.untyped_data(), filter.untyped_data(),
      offset.untyped_data(), mask.untyped_data(), output.untyped_data()));
}

// Every gradient is written: zeros where nothing flows back.
ffi::Error Grad(const TfcoDevice* device, const ffi::AnyBuffer& input,
                const ffi::AnyBuffer& filter, const ffi::AnyBuffer& offset,
                const ffi::AnyBuffer& mask, const ffi::AnyBuffer& grad_output,
                const ffi::AnyBuffer& grad_input,
                const ffi::AnyBuffer& grad_filter,
                const ffi::AnyBuffer& grad_offset,
                const ffi::AnyBuffer& grad_mask,
                ffi::Span<const int64_t> ints) {
  TfcoDeformConv2dArgs args;
  TfcoDtype dtype;
  if (ffi::Error e = Decode(ints, input.element_type(), &args, &dtype);
      e.failure()) {
    return e;
  }
  if (grad_input.element_count() + grad_filter.element_count() +
          grad_offset.element_count() + grad_mask.element_count() ==
      0) {
    return ffi::Error::Success();
  }
  return FfiCoreError(TfcoDeformableConv2dGrad(
      device, dtype, &args, input.untyped_data(), filter.untyped_data(),
      offset.untyped_data(), mask.untyped_data(), grad_output.untyped_data(),
      grad_input.untyped_data(), grad_filter.untyped_data(),
      grad_offset.untyped_data(), grad_mask.untyped_data()));
}

#if TFCO_XLA_FFI

// input, filter, offset and mask; the output.
template <typename Binding>
auto ForwardBinding(Binding binding) {
  return WithBuffers<4, 1>(std::move(binding))
      .template Attr<ffi::Span<const int64_t>>("ints");
}

// input, filter, offset, mask and grad_output; their gradients.
template <typename Binding>
auto GradBinding(Binding binding) {
  return WithBuffers<5, 4>(std::move(binding))
      .template Attr<ffi::Span<const int64_t>>("ints");
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoDeformableConv2dHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer filter,
       ffi::AnyBuffer offset, ffi::AnyBuffer mask,
       ffi::Result<ffi::AnyBuffer> output, ffi::Span<const int64_t> ints) {
      const FfiCoreDevice device(pool);
      return Forward(device.get(), input, filter, offset, mask, *output, ints);
    },
    ForwardBinding(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoDeformableConv2dGradHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer filter,
       ffi::AnyBuffer offset, ffi::AnyBuffer mask, ffi::AnyBuffer grad_output,
       ffi::Result<ffi::AnyBuffer> grad_input,
       ffi::Result<ffi::AnyBuffer> grad_filter,
       ffi::Result<ffi::AnyBuffer> grad_offset,
       ffi::Result<ffi::AnyBuffer> grad_mask, ffi::Span<const int64_t> ints) {
      const FfiCoreDevice device(pool);
      return Grad(device.get(), input, filter, offset, mask, grad_output,
                  *grad_input, *grad_filter, *grad_offset, *grad_mask, ints);
    },
    GradBinding(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>()));

TFCO_REGISTER_CPU_FFI_HANDLER(kForward, TfcoDeformableConv2dHandler);
TFCO_REGISTER_CPU_FFI_HANDLER(kGrad, TfcoDeformableConv2dGradHandler);

#if TFCO_CUDA

// On XLA's stream. The input gradient adds with atomics, in a varying order,
// as the regular GPU kernel does.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoDeformableConv2dGpuHandler,
    [](void* stream, ffi::AnyBuffer input, ffi::AnyBuffer filter,
       ffi::AnyBuffer offset, ffi::AnyBuffer mask,
       ffi::Result<ffi::AnyBuffer> output, ffi::Span<const int64_t> ints) {
      const TfcoDevice device = StreamDevice(stream);
      return Forward(&device, input, filter, offset, mask, *output, ints);
    },
    ForwardBinding(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoDeformableConv2dGradGpuHandler,
    [](void* stream, ffi::AnyBuffer input, ffi::AnyBuffer filter,
       ffi::AnyBuffer offset, ffi::AnyBuffer mask, ffi::AnyBuffer grad_output,
       ffi::Result<ffi::AnyBuffer> grad_input,
       ffi::Result<ffi::AnyBuffer> grad_filter,
       ffi::Result<ffi::AnyBuffer> grad_offset,
       ffi::Result<ffi::AnyBuffer> grad_mask, ffi::Span<const int64_t> ints) {
      const TfcoDevice device = StreamDevice(stream);
      return Grad(&device, input, filter, offset, mask, grad_output,
                  *grad_input, *grad_filter, *grad_offset, *grad_mask, ints);
    },
    GradBinding(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()));

TFCO_REGISTER_GPU_FFI_HANDLER(kForward, TfcoDeformableConv2dGpuHandler);
TFCO_REGISTER_GPU_FFI_HANDLER(kGrad, TfcoDeformableConv2dGradGpuHandler);

#endif  // TFCO_CUDA

#else  // TFCO_XLA_FFI

// Legacy calls (legacy_custom_call.h) of the same operands, results and
// attributes, on the host.

void TfcoDeformableConv2dLegacy(void* out, const void** in, const char* opaque,
                                size_t opaque_len,
                                XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 4, 1, {"ints"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  const FfiCoreDevice device(f.pool());
  legacy::Finish(status, Forward(device.get(), f.Arg(0), f.Arg(1), f.Arg(2),
                                 f.Arg(3), f.Ret(0), f.Ints("ints")));
}

void TfcoDeformableConv2dGradLegacy(void* out, const void** in,
                                    const char* opaque, size_t opaque_len,
                                    XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 5, 4, {"ints"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  const FfiCoreDevice device(f.pool());
  legacy::Finish(status, Grad(device.get(), f.Arg(0), f.Arg(1), f.Arg(2),
                              f.Arg(3), f.Arg(4), f.Ret(0), f.Ret(1), f.Ret(2),
                              f.Ret(3), f.Ints("ints")));
}

TFCO_REGISTER_CPU_LEGACY_HANDLER(kForward, TfcoDeformableConv2dLegacy);
TFCO_REGISTER_CPU_LEGACY_HANDLER(kGrad, TfcoDeformableConv2dGradLegacy);

#endif  // TFCO_XLA_FFI

}  // namespace

#endif  // TFCO_XLA_CUSTOM_CALLS

}  // namespace deform_conv2d
}  // namespace customops
}  // namespace tensorflow
