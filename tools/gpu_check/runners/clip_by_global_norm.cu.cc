// ClipByGlobalNorm's GPU kernels and its gradient's.

#include "tensorflow_customops/core/kernels/clip_by_global_norm/clip_by_global_norm_op.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

std::map<std::string, Tensor> RunClip(const Case& c, const GPUDevice& d) {
  const bool grad = c.op == "ClipByGlobalNormGrad";
  const int n = static_cast<int>(c.Attr("num_tensors"));
  const DType dtype = c.Input("clip_norm").dtype;
  std::vector<DeviceBuffer> t = Uploads(c, "t", n);
  std::vector<DeviceBuffer> dy =
      grad ? Uploads(c, "dclipped", n) : std::vector<DeviceBuffer>();
  std::vector<DeviceBuffer> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(
        DeviceBuffer::Poisoned(c.Input("t" + std::to_string(i)).data.size()));
  }
  DeviceBuffer scalar_out = DeviceBuffer::Poisoned(SizeOf(dtype));
  std::unique_ptr<DeviceBuffer> dglobal_norm;
  if (grad) dglobal_norm.reset(new DeviceBuffer(c.Input("dglobal_norm")));
  std::vector<const void*> inputs, dclipped;
  std::vector<void*> outputs;
  std::vector<int64_t> sizes;
  for (int i = 0; i < n; ++i) {
    sizes.push_back(c.Input("t" + std::to_string(i)).NumElements());
    inputs.push_back(t[i].get<void>());
    if (grad) dclipped.push_back(dy[i].get<void>());
    outputs.push_back(out[i].get<void>());
  }
  const TfcoDtype core_dtype = CoreDtype(dtype);
  DeviceBuffer scratch(
      TfcoClipByGlobalNormScratchBytes(/*on_gpu=*/1, grad, core_dtype, n));
  // clip_norm is a host value, as in the op kernels (HostMemory).
  const void* clip_norm = c.Input("clip_norm").data.data();
  if (grad) {
    CheckCore(TfcoClipByGlobalNormGrad(
        d.core(), core_dtype, n, inputs.data(), sizes.data(), clip_norm,
        dclipped.data(), dglobal_norm->get<void>(), outputs.data(),
        scalar_out.get<void>(), scratch.get<void>()));
  } else {
    CheckCore(TfcoClipByGlobalNorm(
        d.core(), core_dtype, n, inputs.data(), sizes.data(), clip_norm,
        outputs.data(), scalar_out.get<void>(), scratch.get<void>()));
  }
  d.synchronize();
  std::map<std::string, Tensor> result;
  const std::string prefix = grad ? "dt" : "clipped";
  for (int i = 0; i < n; ++i) {
    const std::string index = std::to_string(i);
    result[prefix + index] = out[i].Download(dtype, c.Input("t" + index).dims);
  }
  result[grad ? "dclip_norm" : "global_norm"] = scalar_out.Download(dtype, {});
  return result;
}

const RegisterRunner kClip({"ClipByGlobalNorm", "ClipByGlobalNormGrad"},
                           RunClip);

}  // namespace
}  // namespace gpu_check
