// CheckNumericsN's GPU kernel: the per-tensor flags it reports, read on the
// host as its GPU OpKernel reads them.

#include <cstring>

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

std::map<std::string, Tensor> RunCheckNumerics(const Case& c,
                                               const GPUDevice& d) {
  const int n = static_cast<int>(c.Attr("num_tensors"));
  std::vector<DeviceBuffer> x = Uploads(c, "x", n);
  std::vector<TfcoDtype> dtypes;
  std::vector<const void*> tensors;
  std::vector<int64_t> sizes;
  for (int i = 0; i < n; ++i) {
    const Tensor& input = c.Input("x" + std::to_string(i));
    dtypes.push_back(CoreDtype(input.dtype));
    tensors.push_back(x[i].get<void>());
    sizes.push_back(input.NumElements());
  }
  // As the GPU OpKernel: the flags come back to page-locked host memory,
  // read once the stream has passed the kernels.
  DeviceBuffer scratch = DeviceBuffer::Poisoned(n * sizeof(int));
  PinnedBuffer host_flags(n * sizeof(int));
  std::memset(host_flags.get<void>(), 0xff, n * sizeof(int));
  CheckCore(TfcoNumericFlags(d.core(), n, dtypes.data(), tensors.data(),
                             sizes.data(), scratch.get<int>(),
                             host_flags.get<int>()));
  Tensor flags;
  flags.dtype = DType::kInt32;
  flags.dims = {n};
  std::string stream_error;
  HostCheck check;
  check.Then(d, [&](TfcoError error) {
    if (error != nullptr) stream_error = error;
    const char* bytes = host_flags.get<char>();
    flags.data.assign(bytes, bytes + n * sizeof(int));
  });
  check.Wait();
  if (!stream_error.empty()) throw std::runtime_error(stream_error);
  return {{"flags", flags}};
}

const RegisterRunner kCheckNumerics({"CheckNumericsN"}, RunCheckNumerics);

}  // namespace
}  // namespace gpu_check
