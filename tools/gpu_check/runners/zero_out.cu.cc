// ZeroOut's GPU kernel.

#include "tensorflow_customops/core/kernels/zero_out/zero_out_op.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

std::map<std::string, Tensor> RunZeroOut(const Case& c, const GPUDevice& d) {
  const Tensor& x = c.Input("x");
  DeviceBuffer dx(x);
  DeviceBuffer y = DeviceBuffer::Poisoned(x.data.size());
  const int64_t keep = static_cast<int64_t>(c.Attr("keep"));
  CheckCore(TfcoZeroOut(d.core(), CoreDtype(x.dtype), dx.get<void>(),
                        y.get<void>(), x.NumElements(), keep));
  d.synchronize();
  return {{"y", y.Download(x.dtype, x.dims)}};
}

const RegisterRunner kZeroOut({"ZeroOut"}, RunZeroOut);

}  // namespace
}  // namespace gpu_check
