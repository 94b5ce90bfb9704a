#include "tools/gpu_check/xla_ffi.h"

#include <stdexcept>
#include <utility>

#include "tensorflow_customops/compiler/tf2xla/ffi_handler.h"

#if TFCO_XLA_FFI

// What XLA's runtime gives a handler, opaque in the FFI's C API: the error
// it returns, and the context it reads the stream from.
struct XLA_FFI_Error {
  std::string message;
};
struct XLA_FFI_ExecutionContext {
  void* stream;
};

namespace gpu_check {
namespace {

std::map<std::string, XLA_FFI_Handler*>& CudaHandlers() {
  static auto* handlers = new std::map<std::string, XLA_FFI_Handler*>;
  return *handlers;
}

XLA_FFI_Error* ErrorCreate(XLA_FFI_Error_Create_Args* args) {
  return new XLA_FFI_Error{args->message};
}

void ErrorGetMessage(XLA_FFI_Error_GetMessage_Args* args) {
  args->message = args->error->message.c_str();
}

void ErrorDestroy(XLA_FFI_Error_Destroy_Args* args) { delete args->error; }

// Keeps the CUDA handlers (the host's are not this program's business).
XLA_FFI_Error* HandlerRegister(XLA_FFI_Handler_Register_Args* args) {
  const std::string platform(args->platform.ptr, args->platform.len);
  if (platform != "CUDA") return nullptr;
  const std::string name(args->name.ptr, args->name.len);
  if (!CudaHandlers().emplace(name, args->bundle.execute).second) {
    return new XLA_FFI_Error{"two CUDA handlers for " + name};
  }
  return nullptr;
}

XLA_FFI_Error* StreamGet(XLA_FFI_Stream_Get_Args* args) {
  args->stream = args->ctx->stream;
  return nullptr;
}

// Anything else a handler asks for is a call this program does not make as
// XLA would: it fails the handler, which then fails its case.
template <typename Args>
XLA_FFI_Error* Unsupported(Args*) {
  return new XLA_FFI_Error{"gpu_check's FFI has no such call"};
}

const XLA_FFI_Api* Api() {
  static const XLA_FFI_Api api = [] {
    XLA_FFI_Api a = {};
    a.struct_size = XLA_FFI_Api_STRUCT_SIZE;
    a.api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, nullptr,
                     XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
    a.XLA_FFI_Error_Create = ErrorCreate;
    a.XLA_FFI_Error_GetMessage = ErrorGetMessage;
    a.XLA_FFI_Error_Destroy = ErrorDestroy;
    a.XLA_FFI_Handler_Register = HandlerRegister;
    a.XLA_FFI_Stream_Get = StreamGet;
    a.XLA_FFI_Type_Register = Unsupported<XLA_FFI_Type_Register_Args>;
    a.XLA_FFI_ExecutionContext_Get =
        Unsupported<XLA_FFI_ExecutionContext_Get_Args>;
    a.XLA_FFI_State_Set = Unsupported<XLA_FFI_State_Set_Args>;
    a.XLA_FFI_State_Get = Unsupported<XLA_FFI_State_Get_Args>;
    a.XLA_FFI_DeviceMemory_Allocate =
        Unsupported<XLA_FFI_DeviceMemory_Allocate_Args>;
    a.XLA_FFI_DeviceMemory_Free = Unsupported<XLA_FFI_DeviceMemory_Free_Args>;
    a.XLA_FFI_ThreadPool_Schedule =
        Unsupported<XLA_FFI_ThreadPool_Schedule_Args>;
    a.XLA_FFI_ThreadPool_NumThreads =
        Unsupported<XLA_FFI_ThreadPool_NumThreads_Args>;
    a.XLA_FFI_Future_Create = Unsupported<XLA_FFI_Future_Create_Args>;
    a.XLA_FFI_Future_SetAvailable =
        Unsupported<XLA_FFI_Future_SetAvailable_Args>;
    a.XLA_FFI_Future_SetError = Unsupported<XLA_FFI_Future_SetError_Args>;
    a.XLA_FFI_RunId_Get = Unsupported<XLA_FFI_RunId_Get_Args>;
    a.XLA_FFI_DeviceOrdinal_Get = Unsupported<XLA_FFI_DeviceOrdinal_Get_Args>;
    return a;
  }();
  return &api;
}

XLA_FFI_DataType FfiType(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return XLA_FFI_DataType_F16;
    case DType::kBfloat16:
      return XLA_FFI_DataType_BF16;
    case DType::kFloat:
      return XLA_FFI_DataType_F32;
    case DType::kDouble:
      return XLA_FFI_DataType_F64;
    case DType::kInt32:
      return XLA_FFI_DataType_S32;
    case DType::kInt64:
      return XLA_FFI_DataType_S64;
    case DType::kInt8:
      return XLA_FFI_DataType_S8;
    case DType::kUint8:
      return XLA_FFI_DataType_U8;
  }
  throw std::runtime_error("unknown dtype");
}

}  // namespace

std::vector<std::string> GpuHandlerTargets() {
  std::vector<std::string> targets;
  for (const auto& entry : CudaHandlers()) targets.push_back(entry.first);
  return targets;
}

FfiCall& FfiCall::Arg(const void* data, DType dtype,
                      std::vector<int64_t> dims) {
  args_.push_back({const_cast<void*>(data), dtype, std::move(dims)});
  return *this;
}

FfiCall& FfiCall::Ret(void* data, DType dtype, std::vector<int64_t> dims) {
  rets_.push_back({data, dtype, std::move(dims)});
  return *this;
}

FfiCall& FfiCall::Ints(const std::string& name, std::vector<int64_t> values) {
  attrs_[name].ints = std::move(values);
  return *this;
}

FfiCall& FfiCall::Float(const std::string& name, float value) {
  attrs_[name].value = value;
  attrs_[name].scalar = true;
  return *this;
}

void FfiCall::Run(const std::string& target, void* stream) const {
  const auto handler = CudaHandlers().find(target);
  if (handler == CudaHandlers().end()) {
    throw std::runtime_error("no CUDA handler for custom call " + target);
  }
  auto buffers = [](const std::vector<Buffer>& from,
                    std::vector<XLA_FFI_Buffer>* to) {
    for (const Buffer& b : from) {
      to->push_back({XLA_FFI_Buffer_STRUCT_SIZE, nullptr, FfiType(b.dtype),
                     b.data, static_cast<int64_t>(b.dims.size()),
                     const_cast<int64_t*>(b.dims.data())});
    }
  };
  std::vector<XLA_FFI_Buffer> args, rets;
  buffers(args_, &args);
  buffers(rets_, &rets);
  std::vector<XLA_FFI_ArgType> arg_types(args.size(), XLA_FFI_ArgType_BUFFER);
  std::vector<XLA_FFI_RetType> ret_types(rets.size(), XLA_FFI_RetType_BUFFER);
  std::vector<void*> arg_ptrs, ret_ptrs;
  for (auto& b : args) arg_ptrs.push_back(&b);
  for (auto& b : rets) ret_ptrs.push_back(&b);

  std::vector<XLA_FFI_ByteSpan> names;
  std::vector<XLA_FFI_Array> arrays;
  std::vector<XLA_FFI_Scalar> scalars;
  names.reserve(attrs_.size());
  arrays.reserve(attrs_.size());
  scalars.reserve(attrs_.size());
  std::vector<XLA_FFI_AttrType> attr_types;
  std::vector<XLA_FFI_ByteSpan*> attr_names;
  std::vector<void*> attr_ptrs;
  for (const auto& [name, attr] : attrs_) {
    names.push_back({name.data(), name.size()});
    attr_names.push_back(&names.back());
    if (attr.scalar) {
      scalars.push_back(
          {XLA_FFI_DataType_F32, const_cast<float*>(&attr.value)});
      attr_types.push_back(XLA_FFI_AttrType_SCALAR);
      attr_ptrs.push_back(&scalars.back());
    } else {
      arrays.push_back({XLA_FFI_DataType_S64, attr.ints.size(),
                        const_cast<int64_t*>(attr.ints.data())});
      attr_types.push_back(XLA_FFI_AttrType_ARRAY);
      attr_ptrs.push_back(&arrays.back());
    }
  }

  XLA_FFI_ExecutionContext context{stream};
  XLA_FFI_CallFrame frame = {};
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.api = Api();
  frame.ctx = &context;
  frame.stage = XLA_FFI_ExecutionStage_EXECUTE;
  frame.args = {XLA_FFI_Args_STRUCT_SIZE, nullptr,
                static_cast<int64_t>(args.size()), arg_types.data(),
                arg_ptrs.data()};
  frame.rets = {XLA_FFI_Rets_STRUCT_SIZE, nullptr,
                static_cast<int64_t>(rets.size()), ret_types.data(),
                ret_ptrs.data()};
  frame.attrs = {XLA_FFI_Attrs_STRUCT_SIZE,
                 nullptr,
                 static_cast<int64_t>(attr_ptrs.size()),
                 attr_types.data(),
                 attr_names.data(),
                 attr_ptrs.data()};
  if (XLA_FFI_Error* error = handler->second(&frame)) {
    const std::string message = error->message;
    delete error;
    throw std::runtime_error(target + ": " + message);
  }
}

}  // namespace gpu_check

namespace tensorflow {
namespace customops {

const XLA_FFI_Api* TfcoFfiApi() { return gpu_check::Api(); }

}  // namespace customops
}  // namespace tensorflow

#else  // TFCO_XLA_FFI

// TensorFlow before 2.20: no typed FFI, so no CUDA handler.
namespace gpu_check {

std::vector<std::string> GpuHandlerTargets() { return {}; }

FfiCall& FfiCall::Arg(const void*, DType, std::vector<int64_t>) {
  return *this;
}
FfiCall& FfiCall::Ret(void*, DType, std::vector<int64_t>) { return *this; }
FfiCall& FfiCall::Ints(const std::string&, std::vector<int64_t>) {
  return *this;
}
FfiCall& FfiCall::Float(const std::string&, float) { return *this; }

void FfiCall::Run(const std::string& target, void*) const {
  throw std::runtime_error("no CUDA handler for custom call " + target);
}

}  // namespace gpu_check

#endif  // TFCO_XLA_FFI
