// The runner of the XLA custom calls' CUDA handlers (xla_ffi.h), one for
// every handler registered: a case of op "xla:<target>" (cases/__init__.py,
// xla_case) holds the call's operands as inputs arg0, arg1, ..., its results
// as outputs ret0, ret1, ..., and its attributes as attrs "ffi.f32.<name>"
// (an f32 scalar) or "ffi.i64s.<name>" (the length of an i64 array) with
// "ffi.i64s.<name>.<i>" (its elements).

#include <string>
#include <vector>

#include "tools/gpu_check/runner.h"
#include "tools/gpu_check/xla_ffi.h"

namespace gpu_check {
namespace {

// The tensors `prefix`0, `prefix`1, ... of `tensors`.
std::vector<const Tensor*> Numbered(
    const std::map<std::string, Tensor>& tensors, const std::string& prefix) {
  std::vector<const Tensor*> found;
  for (auto it = tensors.find(prefix + "0"); it != tensors.end();
       it = tensors.find(prefix + std::to_string(found.size()))) {
    found.push_back(&it->second);
  }
  return found;
}

Outputs RunXlaCall(const Case& c, const GPUDevice& d) {
  FfiCall call;
  std::vector<DeviceBuffer> args, rets;
  const std::vector<const Tensor*> inputs = Numbered(c.inputs, "arg");
  const std::vector<const Tensor*> results = Numbered(c.outputs, "ret");
  for (const Tensor* t : inputs) {
    args.emplace_back(*t);
    call.Arg(args.back().get<void>(), t->dtype, t->dims);
  }
  for (const Tensor* t : results) {
    rets.push_back(DeviceBuffer::Poisoned(t->data.size()));
    call.Ret(rets.back().get<void>(), t->dtype, t->dims);
  }
  const std::string f32 = "ffi.f32.", i64s = "ffi.i64s.";
  for (const auto& [key, value] : c.attrs) {
    if (key.compare(0, f32.size(), f32) == 0) {
      call.Float(key.substr(f32.size()), static_cast<float>(value));
    } else if (key.compare(0, i64s.size(), i64s) == 0 &&
               key.find('.', i64s.size()) == std::string::npos) {
      std::vector<int64_t> ints(static_cast<size_t>(value));
      for (size_t i = 0; i < ints.size(); ++i) {
        ints[i] = static_cast<int64_t>(c.Attr(key + "." + std::to_string(i)));
      }
      call.Ints(key.substr(i64s.size()), ints);
    }
  }
  call.Run(c.op.substr(c.op.find(':') + 1), d.stream());
  d.synchronize();
  Outputs out;
  for (size_t i = 0; i < results.size(); ++i) {
    out["ret" + std::to_string(i)] =
        rets[i].Download(results[i]->dtype, results[i]->dims);
  }
  return out;
}

}  // namespace

void AddXlaRunners() {
  for (const std::string& target : GpuHandlerTargets()) {
    if (!Runners()
             .emplace("xla:" + target, Runner{RunXlaCall, nullptr})
             .second) {
      throw std::logic_error("two runners for xla:" + target);
    }
  }
}

}  // namespace gpu_check
