// CustomOps>CheckCondition under XLA, where a Python Assert is dropped. The
// values pass through as they are; what differs is where the condition is
// checked.
//
// A condition XLA can evaluate when it compiles (one computed from static
// shapes) is checked then, on every lowering and device: false fails the
// compilation with the message. Otherwise, where the lowerings can call the
// portable kernels (custom_call.h), a custom call of the condition, reduced to
// one bool, checks it when the program runs and raises the message (typed
// FFI, TensorFlow 2.20 and newer; a legacy call on 2.12 to 2.19, whose
// failure XLA raises as an Internal error "CustomCall failed: <message>").
// The call has a side effect, so XLA keeps it though nothing reads its
// result, and its failure fails the run, so no value comes out of it: the
// values need no data dependency on the call, which could cost copies.
// Elsewhere (the GPU, TFCO_XLA_LOWERING=hlo) a compiled program cannot
// raise, and the values pass through unchecked.

#include "tensorflow_customops/core/kernels/check_condition/check_condition_op.h"

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

constexpr char kTarget[] = "tfco_check_condition";

#if TFCO_XLA_CUSTOM_CALLS

ffi::Error Check(ffi::ThreadPool pool, const ffi::AnyBuffer& condition,
                 std::string_view message) {
  if (condition.element_type() != ffi::DataType::PRED) {
    return ffi::Error::Internal("CheckCondition: unexpected operand");
  }
  int holds = 0;
  const FfiCoreDevice device(pool);
  if (ffi::Error e = FfiCoreError(TfcoCheckCondition(
          device.get(), static_cast<const bool*>(condition.untyped_data()),
          static_cast<int64_t>(condition.element_count()), &holds));
      e.failure()) {
    return e;
  }
  if (!holds) return ffi::Error::InvalidArgument(std::string(message));
  return ffi::Error::Success();
}

#if TFCO_XLA_FFI

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoCheckConditionHandler,
    [](ffi::ThreadPool pool, ffi::AnyBuffer condition,
       ffi::Result<ffi::AnyBuffer>,
       std::string_view message) { return Check(pool, condition, message); },
    ffi::Ffi::Bind()
        .Ctx<ffi::ThreadPool>()
        .Arg<ffi::AnyBuffer>()
        .Ret<ffi::AnyBuffer>()
        .Attr<std::string_view>("message"));
TFCO_REGISTER_CPU_FFI_HANDLER(kTarget, TfcoCheckConditionHandler);

#else  // TFCO_XLA_FFI

// A legacy call (legacy_custom_call.h) of the same operand and attribute.
void TfcoCheckConditionLegacy(void* out, const void** in, const char* opaque,
                              size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len, 1, 1, {"message"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  legacy::Finish(status, Check(f.pool(), f.Arg(0), f.String("message")));
}
TFCO_REGISTER_CPU_LEGACY_HANDLER(kTarget, TfcoCheckConditionLegacy);

#endif  // TFCO_XLA_FFI

#endif  // TFCO_XLA_CUSTOM_CALLS

class CheckConditionOp : public XlaOpKernel {
 public:
  explicit CheckConditionOp(OpKernelConstruction* context)
      : XlaOpKernel(context)
#if TFCO_XLA_CUSTOM_CALLS
        ,
        // On GPU the condition is in device memory, which a handler could
        // only read by waiting for the stream.
        choice_(context, /*gpu_handlers=*/false)
#endif
  {
    OP_REQUIRES_OK(context, context->GetAttr("message", &message_));
  }

  void Compile(XlaOpKernelContext* context) override {
    xla::Literal known;
    // Fails for a condition that depends on the program's inputs.
    if (context->ConstantInput(0, &known).ok()) {
      OP_REQUIRES(context,
                  context->InputShape(0).num_elements() == 0 || known.IsAll(1),
                  errors::InvalidArgument(message_));
    } else {
      EmitCheck(context);
    }
    for (int i = 1; i < context->num_inputs(); ++i) {
      context->SetOutput(i - 1, context->Input(i));
    }
  }

 private:
  // The run-time check, where the program can raise: a call of the
  // condition reduced to a scalar (which also reduces a dynamic dimension,
  // from tf.boolean_mask say, to its size).
  void EmitCheck(XlaOpKernelContext* context) {
#if TFCO_XLA_CUSTOM_CALLS
    if (!choice_.Use()) return;
    xla::XlaBuilder* b = context->builder();
    const xla::XlaOp holds =
        xla::ReduceAll(context->Input(0), xla::ConstantR0<bool>(b, true),
                       xla::CreateScalarAndComputation(xla::PRED, b));
    FfiAttributes attributes;
    attributes.String("message", message_);
    EmitCustomCall(context, kTarget, {holds}, /*boxes=*/-1, {{xla::PRED, {}}},
                   attributes, /*results_alias_operands=*/true,
                   /*has_side_effect=*/true);
#endif
  }

  std::string message_;
#if TFCO_XLA_CUSTOM_CALLS
  CustomCallChoice choice_;
#endif
};

TFCO_REGISTER_XLA_OP("CustomOps>CheckCondition", CheckConditionOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
