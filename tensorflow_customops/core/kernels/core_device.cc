#include "tensorflow_customops/core/kernels/core_device.h"

#include <utility>

namespace tensorflow {
namespace customops {

namespace {

struct ErrorState {
  bool failed = false;
  std::string message;
};

ErrorState& Error() {
  thread_local ErrorState state;
  return state;
}

}  // namespace

void CallerThreadPool::Schedule(std::function<void()> fn) {
  auto* task = new std::function<void()>(std::move(fn));
  pool_.schedule(
      pool_.pool,
      [](void* arg) {
        auto* f = static_cast<std::function<void()>*>(arg);
        (*f)();
        delete f;
      },
      task);
}

void RecordError(const std::string& message) {
  ErrorState& e = Error();
  if (e.failed) return;
  e.failed = true;
  e.message = message;
}

void ClearError() { Error().failed = false; }

void NoKernelFor(const char* op, TfcoDtype dtype) {
  RecordError(std::string(op) + ": no kernel for element type " +
              std::to_string(static_cast<int>(dtype)));
}

TfcoError CurrentError() {
  const ErrorState& e = Error();
  return e.failed ? e.message.c_str() : nullptr;
}

}  // namespace customops
}  // namespace tensorflow

extern "C" TfcoError TfcoCopyToGpu(const TfcoDevice* device, const void* host,
                                   void* gpu, int64_t bytes) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunOnDevice("CopyToGpu", device, [&](const auto& d) {
    if constexpr (std::is_same<std::decay_t<decltype(d)>, GPUDevice>::value) {
      CopyToGpuAndWait(d, gpu, host, bytes);
    } else {
      RecordError("CopyToGpu: the device is not a GPU");
    }
  });
}
