// CustomOps>CheckNumericsN under XLA. Its contract is an error when a value
// is NaN or Inf. Where the lowerings can call the portable kernels
// (custom_call.h), the op is a custom call that runs the regular kernel's
// check and raises its error, its outputs the inputs' buffers. Elsewhere a
// compiled program could not raise one at run time, and passing the tensors
// through unchecked would break the contract silently, so compilation fails
// with the reason.

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"

#include <string>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/static_shapes.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"

namespace tensorflow {
namespace customops {
namespace {

constexpr char kTarget[] = "tfco_check_numerics_n";

#if TFCO_XLA_CUSTOM_CALLS

ffi::Error CheckNumerics(ffi::ThreadPool pool,
                         const std::vector<ffi::AnyBuffer>& tensors,
                         std::string_view message) {
  const int n = static_cast<int>(tensors.size());
  std::vector<TfcoDtype> dtypes(n);
  std::vector<const void*> data(n);
  std::vector<int64_t> sizes(n);
  for (int i = 0; i < n; ++i) {
    if (!CoreDtypeOf(tensors[i].element_type(), &dtypes[i])) {
      return ffi::Error::Internal("CheckNumericsN: unexpected operand");
    }
    data[i] = tensors[i].untyped_data();
    sizes[i] = static_cast<int64_t>(tensors[i].element_count());
  }
  std::vector<int> flags(n);
  const FfiCoreDevice device(pool);
  if (ffi::Error e = FfiCoreError(TfcoNumericFlags(
          device.get(), n, dtypes.data(), data.data(), sizes.data(),
          /*scratch=*/nullptr, flags.data()));
      e.failure()) {
    return e;
  }
  const std::string error =
      TfcoNumericsError(std::string(message), flags.data(), n);
  if (!error.empty()) return ffi::Error::InvalidArgument(error);
  return ffi::Error::Success();
}

#if TFCO_XLA_FFI

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TfcoCheckNumericsNHandler,
    [](ffi::ThreadPool pool, ffi::RemainingArgs args, ffi::RemainingRets,
       std::string_view message) {
      std::vector<ffi::AnyBuffer> tensors;
      for (size_t i = 0; i < args.size(); ++i) {
        const auto tensor = args.get<ffi::AnyBuffer>(i);
        if (!tensor.has_value()) {
          return ffi::Error::Internal("CheckNumericsN: unexpected operand");
        }
        tensors.push_back(*tensor);
      }
      return CheckNumerics(pool, tensors, message);
    },
    ffi::Ffi::Bind()
        .Ctx<ffi::ThreadPool>()
        .RemainingArgs()
        .RemainingRets()
        .Attr<std::string_view>("message"));
TFCO_REGISTER_CPU_FFI_HANDLER(kTarget, TfcoCheckNumericsNHandler);

#else  // TFCO_XLA_FFI

// A legacy call (legacy_custom_call.h) of the same operands and attributes.
void TfcoCheckNumericsNLegacy(void* out, const void** in, const char* opaque,
                              size_t opaque_len, XlaCustomCallStatus* status) {
  const legacy::CallFrame f(out, in, opaque, opaque_len,
                            legacy::CallFrame::kAny, legacy::CallFrame::kAny,
                            {"message"});
  if (!f.ok()) return legacy::Finish(status, f.error());
  std::vector<ffi::AnyBuffer> tensors;
  for (size_t i = 0; i < f.num_args(); ++i) tensors.push_back(f.Arg(i));
  legacy::Finish(status, CheckNumerics(f.pool(), tensors, f.String("message")));
}
TFCO_REGISTER_CPU_LEGACY_HANDLER(kTarget, TfcoCheckNumericsNLegacy);

#endif  // TFCO_XLA_FFI

#endif  // TFCO_XLA_CUSTOM_CALLS

class CheckNumericsNOp : public XlaOpKernel {
 public:
  explicit CheckNumericsNOp(OpKernelConstruction* context)
      : XlaOpKernel(context)
#if TFCO_XLA_CUSTOM_CALLS
        ,
        // On GPU the check would have to wait for the stream to read the
        // flags on the host, which a handler must not.
        choice_(context, /*gpu_handlers=*/false)
#endif
  {
    OP_REQUIRES_OK(context, context->GetAttr("message", &message_));
  }

  void Compile(XlaOpKernelContext* context) override {
#if TFCO_XLA_CUSTOM_CALLS
    if (choice_.Use()) {
      std::vector<int> inputs;
      std::vector<xla::XlaOp> operands;
      std::vector<CustomCallResult> results;
      for (int i = 0; i < context->num_inputs(); ++i) {
        inputs.push_back(i);
        operands.push_back(context->Input(i));
        const auto dims = context->InputShape(i).dim_sizes();
        results.push_back({context->input_xla_type(i),
                           std::vector<int64_t>(dims.begin(), dims.end())});
      }
      // The handler would check the padding past a dynamic size too.
      OP_REQUIRES_OK(context, CheckStaticDimensions(context, inputs));
      FfiAttributes attributes;
      attributes.String("message", message_);
      const std::vector<xla::XlaOp> outputs =
          EmitCustomCall(context, kTarget, operands, /*boxes=*/-1, results,
                         attributes, /*results_alias_operands=*/true);
      for (size_t i = 0; i < outputs.size(); ++i) {
        context->SetOutput(i, outputs[i]);
      }
      return;
    }
#endif
    context->SetStatus(errors::Unimplemented(
        "CustomOps>CheckNumericsN cannot be compiled with XLA here (off the "
        "CPU, or with TFCO_XLA_LOWERING=hlo): such a compiled program "
        "cannot raise an error on the values it computes, and passing NaN or "
        "Inf through unchecked would break the op's contract. Call "
        "tfco.check_numerics_n outside the jit_compile function."));
  }

 private:
  std::string message_;
#if TFCO_XLA_CUSTOM_CALLS
  CustomCallChoice choice_;
#endif
};

TFCO_REGISTER_XLA_OP("CustomOps>CheckNumericsN", CheckNumericsNOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
