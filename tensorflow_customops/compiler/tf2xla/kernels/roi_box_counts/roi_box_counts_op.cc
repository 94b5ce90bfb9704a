// CustomOps>RoiBoxCounts under XLA. The shapes are known when XLA compiles,
// so the image-count errors are raised then, on every lowering. The counts'
// values are known only when the program runs: where the lowerings can call
// the portable kernels (custom_call.h), the op is a custom call that checks
// them as the regular kernel does and raises its error, its output the input's
// buffer (typed FFI, TensorFlow 2.20 and newer; a legacy call on 2.12 to
// 2.19, whose failure XLA raises as an Internal error "CustomCall failed:
// <message>"). Elsewhere (the GPU, TFCO_XLA_LOWERING=hlo) a compiled program
// cannot raise, and the counts are clamped to [0, K]: what the RoI functions
// then pool is the boxes of each image up to its clamped count, a count
// below 0 giving none and one above K all K.

#include "tensorflow_customops/core/kernels/roi_box_counts/roi_box_counts_op.h"

#include <string>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

constexpr char kTarget[] = "tfco_roi_box_counts";

#if TFCO_XLA_CUSTOM_CALLS

ffi::Error CheckCounts(ffi::ThreadPool pool, const ffi::AnyBuffer& counts,
                       int64_t boxes_per_image) {
  TfcoDtype dtype;
  if (!CoreDtypeOf(counts.element_type(), &dtype) ||
      (dtype != TFCO_INT32 && dtype != TFCO_INT64)) {
    return ffi::Error::Internal("RoiBoxCounts: unexpected operand");
  }
  const int64_t n = static_cast<int64_t>(counts.element_count());
  int flags = 0;
  const FfiCoreDevice device(pool);
  if (ffi::Error e = FfiCoreError(TfcoRoiBoxCounts(device.get(), dtype,
                                                   counts.untyped_data(), n,
                                                   boxes_per_image, &flags));
      e.failure()) {
    return e;
  }
  const std::string error =
      dtype == TFCO_INT32
          ? TfcoRoiBoxCountsError(
                flags, static_cast<const int32_t*>(counts.untyped_data()), n,
                boxes_per_image)
          : TfcoRoiBoxCountsError(
                flags, static_cast<const int64_t*>(counts.untyped_data()), n,
                boxes_per_image);
  if (!error.empty()) return ffi::Error::InvalidArgument(error);
  return ffi::Error::Success();
}

#if TFCO_XLA_FFI

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiBoxCountsHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer counts, ffi::Result<ffi::AnyBuffer>,
       int64_t boxes_per_image) {
      return CheckCounts(pool, counts, boxes_per_image);
    },
    ffi::Ffi::Bind()
        .Ctx<ffi::ThreadPool>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<int64_t>("boxes_per_image"));
TFCO_REGISTER_CPU_FFI_HANDLER(kTarget, TfcoRoiBoxCountsHandler);

#else  // TFCO_XLA_FFI

// A legacy call (legacy_custom_call.h) of the same operand, result and
// attribute; the result is the operand's buffer there too.
void TfcoRoiBoxCountsLegacy(void* out, const void** in, const char* opaque,
                            size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 1, 1,
                            {"boxes_per_image"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  const auto boxes_per_image = f.Ints("boxes_per_image");
  legacy::Finish(
      status, boxes_per_image.size() == 1
                  ? CheckCounts(f.pool(), f.Arg(0), boxes_per_image[0])
                  : ffi::Error::Internal("RoiBoxCounts: unexpected attribute"));
}
TFCO_REGISTER_CPU_LEGACY_HANDLER(kTarget, TfcoRoiBoxCountsLegacy);

#endif  // TFCO_XLA_FFI

#endif  // TFCO_XLA_CUSTOM_CALLS

class RoiBoxCountsOp : public XlaOpKernel {
 public:
  explicit RoiBoxCountsOp(OpKernelConstruction* context)
      : XlaOpKernel(context)
#if TFCO_XLA_CUSTOM_CALLS
        ,
        // On GPU the counts are in device memory, which a handler could
        // only read by waiting for the stream.
        choice_(context, /*gpu_handlers=*/false)
#endif
  {
  }

  void Compile(XlaOpKernelContext* context) override {
    xla::XlaBuilder* b = context->builder();
    const xla::Shape features = *b->GetShape(context->Input(0));
    const xla::Shape rois = *b->GetShape(context->Input(1));
    const xla::Shape counts = *b->GetShape(context->Input(2));
    // A dimension of dynamic size (from tf.boolean_mask, say) is known only
    // at run time, where the HLO cannot raise: it is not compared.
    auto size = [](const xla::Shape& shape, int dim) -> int64_t {
      return shape.dimensions_size() > dim && !shape.is_dynamic_dimension(dim)
                 ? shape.dimensions(dim)
                 : -1;
    };
    const int64_t images = size(rois, 0);
    // Where either side is unknown, the two are passed as equal.
    auto against_images = [images](int64_t n) {
      return n < 0 || images < 0 ? images : n;
    };
    const std::string shape_error = TfcoRoiBoxCountsShapeError(
        features.dimensions_size(), rois.dimensions_size(),
        counts.dimensions_size(), against_images(size(features, 0)), images,
        against_images(size(counts, 0)));
    OP_REQUIRES(context, shape_error.empty(),
                errors::InvalidArgument(shape_error));
    if (counts.dimensions(0) == 0) {
      context->SetOutput(0, context->Input(2));
      return;
    }
#if TFCO_XLA_CUSTOM_CALLS
    if (choice_.Use() && !rois.is_dynamic_dimension(1) &&
        !HasOtherDynamicDimensions(context, {context->Input(2)}, {})) {
      FfiAttributes attributes;
      attributes.Int("boxes_per_image", rois.dimensions(1));
      context->SetOutput(
          0, EmitCustomCall(context, kTarget, {context->Input(2)},
                            /*boxes=*/-1,
                            {{counts.element_type(), {counts.dimensions(0)}}},
                            attributes, /*results_alias_operands=*/true,
                            /*has_side_effect=*/true)[0]);
      return;
    }
#endif
    const xla::PrimitiveType type = counts.element_type();
    const xla::XlaOp boxes_per_image = xla::ConvertElementType(
        xla::GetDimensionSize(context->Input(1), 1), type);
    context->SetOutput(
        0, xla::Clamp(xla::Zero(b, type), context->Input(2), boxes_per_image));
  }

#if TFCO_XLA_CUSTOM_CALLS

 private:
  CustomCallChoice choice_;
#endif
};

TFCO_REGISTER_XLA_OP("CustomOps>RoiBoxCounts", RoiBoxCountsOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
