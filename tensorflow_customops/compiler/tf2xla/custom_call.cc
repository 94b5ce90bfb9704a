#include "tensorflow_customops/compiler/tf2xla/custom_call.h"

// Which custom calls this build's lowerings make into the portable kernels: 0
// none, 1 typed FFI, 2 legacy; the package reports it in build_info().
extern "C" __attribute__((visibility("default"))) int TfcoXlaCustomCalls() {
  return TFCO_XLA_FFI ? 1 : TFCO_XLA_LEGACY_CALLS ? 2 : 0;
}

#if TFCO_XLA_CUSTOM_CALLS

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow_customops/core/kernels/portable/gpu_support.h"
#include "tensorflow_customops/core/platform/status_compat.h"

#if TFCO_XLA_FFI
namespace xla {
namespace ffi {
// The FFI registry XLA reads, exported by TensorFlow 2.20 and newer (from
// libtensorflow_cc, or libtensorflow_framework in 2.21) under this name; its
// header pulls in XLA's internals, so it is declared here.
const XLA_FFI_Api* GetXlaFfiApi();
}  // namespace ffi
}  // namespace xla
#endif

namespace tensorflow {
namespace customops {

CustomCallChoice::CustomCallChoice(OpKernelConstruction* context,
                                   bool gpu_handlers)
    : on_gpu_(context->device_type().type_string() == DEVICE_GPU_XLA_JIT),
      // TFCO_CUDA: the portable kernels built with this library have CUDA
      // kernels; they may still be unable to run here (an old driver, a GPU
      // without code), and then the GPU lowers to HLO as the OpKernels fall
      // back to the CPU (docs/gpu.md).
      has_handler_(context->device_type().type_string() == DEVICE_CPU_XLA_JIT ||
                   (on_gpu_ && gpu_handlers && TFCO_CUDA && TFCO_XLA_FFI &&
                    TfcoGetGpuSupport()->usable)) {
#if TFCO_XLA_LEGACY_CALLS
  if (has_handler_) legacy::KeepPool(context);
#endif
}

bool CustomCallChoice::Use() const {
  const char* lowering = std::getenv("TFCO_XLA_LOWERING");
  return has_handler_ &&
         (lowering == nullptr || std::strcmp(lowering, "hlo") != 0);
}

FfiAttributes& FfiAttributes::Int(const char* name, int64_t value) {
  entries_.push_back(absl::StrCat(name, " = ", value, " : i64"));
  return *this;
}

FfiAttributes& FfiAttributes::Float(const char* name, float value) {
  // The bits, as MLIR's hexadecimal float literal: exact, NaN and inf too.
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  entries_.push_back(absl::StrFormat("%s = 0x%08X : f32", name, bits));
  return *this;
}

FfiAttributes& FfiAttributes::Bool(const char* name, bool value) {
  entries_.push_back(absl::StrCat(name, " = ", value ? "true" : "false"));
  return *this;
}

FfiAttributes& FfiAttributes::Ints(const char* name,
                                   absl::Span<const int64_t> values) {
  entries_.push_back(absl::StrCat(name, " = array<i64",
                                  values.empty() ? "" : ": ",
                                  absl::StrJoin(values, ", "), ">"));
  return *this;
}

FfiAttributes& FfiAttributes::String(const char* name,
                                     absl::string_view value) {
  // MLIR string literals take any byte as a backslash and two hex digits.
  std::string escaped;
  for (const unsigned char c : value) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      escaped += c;
    } else {
      absl::StrAppendFormat(&escaped, "\\%02X", c);
    }
  }
  entries_.push_back(absl::StrCat(name, " = \"", escaped, "\""));
  return *this;
}

std::string FfiAttributes::str() const {
  return absl::StrCat("{", absl::StrJoin(entries_, ", "), "}");
}

namespace {

xla::Shape RowMajor(xla::PrimitiveType type, absl::Span<const int64_t> dims) {
  return xla::ShapeUtil::MakeShapeWithDescendingLayout(type, dims);
}

}  // namespace

std::vector<xla::XlaOp> EmitCustomCall(
    XlaOpKernelContext* context, const char* target,
    std::vector<xla::XlaOp> operands, int boxes,
    const std::vector<CustomCallResult>& results,
    const FfiAttributes& attributes, bool results_alias_operands,
    bool has_side_effect) {
  xla::XlaBuilder* b = context->builder();
  xla::XlaOp count;
  bool dynamic_boxes = false;
  if (boxes >= 0) {
    count = xla::GetDimensionSize(operands[boxes], 0);
    dynamic_boxes = b->GetShape(operands[boxes])->is_dynamic_dimension(0);
  }
  std::vector<xla::Shape> operand_shapes;
  for (xla::XlaOp& operand : operands) {
    const xla::Shape shape = *b->GetShape(operand);
    for (int i = 0; i < shape.dimensions_size(); ++i) {
      if (shape.is_dynamic_dimension(i)) {
        operand = xla::RemoveDynamicDimension(operand, i);
      }
    }
    operand_shapes.push_back(
        RowMajor(shape.element_type(), shape.dimensions()));
  }
  if (boxes >= 0) {
    operands.push_back(count);
    operand_shapes.push_back(RowMajor(xla::S32, {}));
  }
  std::vector<std::pair<xla::ShapeIndex, std::pair<int64_t, xla::ShapeIndex>>>
      aliasing;
  if (results_alias_operands) {
    for (size_t i = 0; i < results.size(); ++i) {
      aliasing.push_back({results.size() == 1
                              ? xla::ShapeIndex{}
                              : xla::ShapeIndex{static_cast<int64_t>(i)},
                          {static_cast<int64_t>(i), xla::ShapeIndex{}}});
    }
  }
  std::vector<xla::Shape> result_shapes;
  for (const CustomCallResult& result : results) {
    result_shapes.push_back(RowMajor(result.type, result.dims));
  }
#if TFCO_XLA_FFI
  const std::string config = attributes.str();
  constexpr auto api = xla::CustomCallApiVersion::API_VERSION_TYPED_FFI;
#else
  const std::string config =
      legacy::DescribeBuffers(attributes, operand_shapes, result_shapes);
  // XLA's CPU backend passes the opaque string and a status to fail through.
  constexpr auto api =
      xla::CustomCallApiVersion::API_VERSION_STATUS_RETURNING_UNIFIED;
#endif
  const xla::Shape shape = result_shapes.size() == 1
                               ? result_shapes[0]
                               : xla::ShapeUtil::MakeTupleShape(result_shapes);
  const xla::XlaOp call = xla::CustomCallWithLayout(
      b, target, operands, shape, operand_shapes, config, has_side_effect,
      aliasing,
      /*literal=*/nullptr, xla::CustomCallSchedule::SCHEDULE_NONE, api);
  std::vector<xla::XlaOp> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    xla::XlaOp output =
        results.size() == 1 ? call : xla::GetTupleElement(call, i);
    if (dynamic_boxes && results[i].rows_are_boxes) {
      output = xla::SetDimensionSize(output, count, 0);
    }
    outputs.push_back(output);
  }
  return outputs;
}

bool HasOtherDynamicDimensions(XlaOpKernelContext* context,
                               absl::Span<const xla::XlaOp> operands,
                               absl::Span<const int> rows) {
  for (size_t j = 0; j < operands.size(); ++j) {
    const xla::Shape shape = *context->builder()->GetShape(operands[j]);
    const bool boxes_first =
        std::find(rows.begin(), rows.end(), static_cast<int>(j)) != rows.end();
    for (int i = boxes_first ? 1 : 0; i < shape.dimensions_size(); ++i) {
      if (shape.is_dynamic_dimension(i)) return true;
    }
  }
  return false;
}

ffi::Error FfiError(const Status& status) {
  if (status.ok()) return ffi::Error::Success();
  return ffi::Error(static_cast<ffi::ErrorCode>(status.code()),
                    StatusMessage(status));
}

#if TFCO_XLA_FFI
namespace {

// The handlers registered through TfcoFfiApi(), "<platform>:<name>" (the
// library's static initialisers register them all before any other call).
std::vector<std::string>& RegisteredHandlers() {
  static auto* names = new std::vector<std::string>;
  return *names;
}

XLA_FFI_Handler_Register* process_register = nullptr;

XLA_FFI_Error* RecordRegistration(XLA_FFI_Handler_Register_Args* args) {
  XLA_FFI_Error* error = process_register(args);
  if (error == nullptr) {
    RegisteredHandlers().push_back(
        absl::StrCat(absl::string_view(args->platform.ptr, args->platform.len),
                     ":", absl::string_view(args->name.ptr, args->name.len)));
  }
  return error;
}

}  // namespace

// The process's registry, whose registrations are recorded on the way, so
// that build_info() lists the handlers this library gave XLA and
// tools/gpu_check's test can hold gpu_check's list of CUDA handlers to it.
const XLA_FFI_Api* TfcoFfiApi() {
  static const XLA_FFI_Api* api = [] {
    const XLA_FFI_Api* process = xla::ffi::GetXlaFfiApi();
    process_register = process->XLA_FFI_Handler_Register;
    auto* recording = new XLA_FFI_Api(*process);
    recording->XLA_FFI_Handler_Register = RecordRegistration;
    return recording;
  }();
  return api;
}
#endif

}  // namespace customops
}  // namespace tensorflow

#if TFCO_XLA_FFI
// The typed-FFI handlers this library registered, "<platform>:<name>", one a
// line; the package reports them in build_info().
extern "C" __attribute__((visibility("default"))) const char*
TfcoXlaFfiHandlers() {
  static const std::string* joined = new std::string(
      absl::StrJoin(tensorflow::customops::RegisteredHandlers(), "\n"));
  return joined->c_str();
}
#endif

#endif  // TFCO_XLA_CUSTOM_CALLS
