// CustomOps>RoiBoxCounts under XLA. Where the shapes are static, the
// image-count errors are raised when XLA compiles, on every lowering. Where
// the lowerings can call the portable kernels (custom_call.h), the op is a
// custom call that checks, as the regular kernel does, the counts' values and
// any of the sizes compared that are dynamic (from tf.boolean_mask in the
// compiled function, say), and raises its errors; its output is the input's
// buffer (typed FFI, TensorFlow 2.20 and newer; a legacy call on 2.12 to 2.19,
// whose failure XLA raises as an Internal error "CustomCall failed:
// <message>"). Elsewhere (the GPU, TFCO_XLA_LOWERING=hlo) a compiled program
// cannot raise, and the counts are clamped to [0, K]: what the RoI functions
// then pool is the boxes of each image up to its clamped count, a count
// below 0 giving none and one above K all K.

#include "tensorflow_customops/core/kernels/roi_box_counts/roi_box_counts_op.h"

#include <string>
#include <vector>

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

// The call's operands: the counts, padded to their bound where their size is
// dynamic; the run-time sizes the regular kernel compares, S32 [features'
// images, rois' images, K]; the counts' run-time size (custom_call.h).
enum Size { kFeatureImages, kImages, kBoxesPerImage, kSizes };

ffi::Error CheckCounts(ffi::ThreadPool pool, const ffi::AnyBuffer& counts,
                       const ffi::AnyBuffer& sizes, int32_t n) {
  TfcoDtype dtype;
  if (!CoreDtypeOf(counts.element_type(), &dtype) ||
      (dtype != TFCO_INT32 && dtype != TFCO_INT64) ||
      sizes.element_type() != ffi::DataType::S32 ||
      sizes.element_count() != kSizes || n < 0 ||
      static_cast<size_t>(n) > counts.element_count()) {
    return ffi::Error::Internal("RoiBoxCounts: unexpected operand");
  }
  const int32_t* size = static_cast<const int32_t*>(sizes.untyped_data());
  const std::string shape_error = TfcoRoiBoxCountsShapeError(
      4, 3, 1, size[kFeatureImages], size[kImages], n);
  if (!shape_error.empty()) return ffi::Error::InvalidArgument(shape_error);
  int flags = 0;
  const FfiCoreDevice device(pool);
  if (ffi::Error e = FfiCoreError(
          TfcoRoiBoxCounts(device.get(), dtype, counts.untyped_data(), n,
                           size[kBoxesPerImage], &flags));
      e.failure()) {
    return e;
  }
  const std::string error =
      dtype == TFCO_INT32
          ? TfcoRoiBoxCountsError(
                flags, static_cast<const int32_t*>(counts.untyped_data()), n,
                size[kBoxesPerImage])
          : TfcoRoiBoxCountsError(
                flags, static_cast<const int64_t*>(counts.untyped_data()), n,
                size[kBoxesPerImage]);
  if (!error.empty()) return ffi::Error::InvalidArgument(error);
  return ffi::Error::Success();
}

#if TFCO_XLA_FFI

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoRoiBoxCountsHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer counts, ffi::AnyBuffer sizes,
       ffi::BufferR0<ffi::S32> n, ffi::Result<ffi::AnyBuffer>) {
      return CheckCounts(pool, counts, sizes, *n.typed_data());
    },
    ffi::Ffi::Bind()
        .Ctx<ffi::ThreadPool>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::AnyBuffer>()
        .Arg<ffi::BufferR0<ffi::S32>>()
        .Ret<ffi::AnyBuffer>());
TFCO_REGISTER_CPU_FFI_HANDLER(kTarget, TfcoRoiBoxCountsHandler);

#else  // TFCO_XLA_FFI

// A legacy call (legacy_custom_call.h) of the same operands and result; the
// result is the counts' buffer there too.
void TfcoRoiBoxCountsLegacy(void* out, const void** in, const char* opaque,
                            size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 3, 1, {});
  if (!f.ok()) return legacy::Finish(status, f.error());
  legacy::Finish(
      status,
      CheckCounts(f.pool(), f.Arg(0), f.Arg(1),
                  *static_cast<const int32_t*>(f.Arg(2).untyped_data())));
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
    // at run time: the custom call compares it then, the HLO not at all.
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
    if (choice_.Use()) {
      auto run_time = [](xla::XlaOp operand, int dim) {
        return xla::Reshape(xla::GetDimensionSize(operand, dim), {1});
      };
      std::vector<xla::XlaOp> sizes(kSizes);
      sizes[kFeatureImages] = run_time(context->Input(0), 0);
      sizes[kImages] = run_time(context->Input(1), 0);
      sizes[kBoxesPerImage] = run_time(context->Input(1), 1);
      context->SetOutput(
          0, EmitCustomCall(context, kTarget,
                            {context->Input(2), xla::ConcatInDim(b, sizes, 0)},
                            /*boxes=*/0,
                            {{counts.element_type(),
                              {counts.dimensions(0)},
                              /*rows_are_boxes=*/true}},
                            FfiAttributes(), /*results_alias_operands=*/true,
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
