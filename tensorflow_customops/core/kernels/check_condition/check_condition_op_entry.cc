// The portable kernels' check of CustomOps>CheckCondition. A condition is a few
// bools (a scalar, usually) in host memory on every device, so one loop on
// the calling thread reads it; the GPU kernel runs it too.

#include "tensorflow_customops/core/kernels/check_condition/check_condition_op.h"
#include "tensorflow_customops/core/kernels/portable/device.h"

extern "C" TfcoError TfcoCheckCondition(const TfcoDevice* device,
                                        const bool* condition, int64_t size,
                                        int* holds) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunOnDevice("CheckCondition", device, [&](const auto&) {
    int all = 1;
    for (int64_t i = 0; i < size && all; ++i) all = condition[i] ? 1 : 0;
    *holds = all;
  });
}
