// The RoI family's GPU kernels: forward, backward, box gradient, and the
// box check of the XLA GPU lowering.

#include <cstring>

#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

namespace roi = tensorflow::customops::roi;

// A RoI case's kernel arguments, built as the op kernels build them, and the
// dims of its pooled tensor.
struct RoiCall {
  roi::RoiArgs args;
  std::vector<int64_t> pooled_dims;
};

RoiCall MakeRoiCall(const Case& c, roi::RoiKind kind) {
  const Tensor& features = c.Input("features");
  const Tensor& rois = c.Input("rois");
  if (features.dims.size() != 4 || rois.dims.size() != 2 || rois.dims[1] != 5 ||
      (rois.dtype != DType::kFloat && rois.dtype != DType::kDouble)) {
    throw std::runtime_error(
        "features must be 4-D and rois float32 or float64 [K, 5]");
  }
  RoiCall call;
  roi::RoiAttrs& a = call.args.attrs;
  a.kind = kind;
  a.pooled_height = static_cast<int>(c.Attr("pooled_height"));
  a.pooled_width = static_cast<int>(c.Attr("pooled_width"));
  a.spatial_scale = static_cast<float>(c.Attr("spatial_scale"));
  if (a.bilinear()) {
    a.sampling_ratio = static_cast<int>(c.Attr("sampling_ratio"));
    a.aligned = c.Attr("aligned") != 0;
  }
  a.nchw = c.Attr("nchw") != 0;
  const std::vector<int64_t>& d = features.dims;
  roi::RoiShape& s = call.args.shape;
  s.batch = d[0];
  s.height = a.nchw ? d[2] : d[1];
  s.width = a.nchw ? d[3] : d[2];
  s.channels = a.nchw ? d[1] : d[3];
  s.num_rois = rois.dims[0];
  s.out_channels = a.position_sensitive() ? s.channels / a.bins() : s.channels;
  call.args.features_layout =
      roi::Layout::Make(a.nchw, s.height, s.width, s.channels);
  call.args.pooled_layout = roi::Layout::Make(a.nchw, a.pooled_height,
                                              a.pooled_width, s.out_channels);
  call.pooled_dims = a.nchw
                         ? std::vector<int64_t>{s.num_rois, s.out_channels,
                                                a.pooled_height, a.pooled_width}
                         : std::vector<int64_t>{s.num_rois, a.pooled_height,
                                                a.pooled_width, s.out_channels};
  return call;
}

roi::RoiKind RoiKindOf(const std::string& op) {
  if (op == "RoiAlign") return roi::RoiKind::kAlign;
  if (op == "PsRoiAlign") return roi::RoiKind::kPsAlign;
  if (op == "RoiPool") return roi::RoiKind::kPool;
  if (op == "PsRoiPool") return roi::RoiKind::kPsPool;
  throw std::runtime_error("not a RoI op: " + op);
}

// Device copies of a RoI case's tensors, and the calls of its kernels, as
// the op kernels make them. Shared by the check and the benchmark.
class RoiRunner {
 public:
  RoiRunner(const Case& c, const GPUDevice& d)
      : case_(c),
        d_(d),
        call_(MakeRoiCall(c, RoiKindOf(c.op.substr(
                                 0, c.op.size() - (IsGrad(c.op) ? 4 : 0))))),
        dtype_(c.Input("features").dtype),
        boxes_dtype_(CoreDtype(c.Input("rois").dtype)),
        features_(c.Input("features")),
        rois_(c.Input("rois").data.size()),
        pooled_(DeviceBuffer::Poisoned(Elements(call_.pooled_dims) *
                                       SizeOf(dtype_))),
        argmax_(DeviceBuffer::Poisoned(Elements(call_.pooled_dims) *
                                       sizeof(int32_t))),
        grad_features_(
            DeviceBuffer::Poisoned(c.Input("features").data.size())) {
    const auto grads = c.inputs.find("grads");
    if (grads != c.inputs.end()) grads_.reset(new DeviceBuffer(grads->second));
    const auto argmax = c.inputs.find("argmax");
    if (argmax != c.inputs.end()) {
      argmax_input_.reset(new DeviceBuffer(argmax->second));
    }
  }

  static bool IsGrad(const std::string& op) {
    return op.size() > 4 && op.compare(op.size() - 4, 4, "Grad") == 0;
  }
  bool has_grads() const { return grads_ != nullptr; }

  void Forward() {
    const roi::RoiArgs& args = call_.args;
    const TfcoDtype dtype = CoreDtype(dtype_);
    const void* rois = device_rois();
    if (args.attrs.bilinear()) {
      CheckCore(TfcoRoiAlign(d_.core(), dtype, boxes_dtype_, &args,
                             features_.get<void>(), rois, pooled_.get<void>()));
    } else {
      // argmax is RoiPool's output only.
      CheckCore(TfcoRoiPool(d_.core(), dtype, boxes_dtype_, &args,
                            features_.get<void>(), rois, pooled_.get<void>(),
                            args.attrs.kind == roi::RoiKind::kPool
                                ? argmax_.get<int32_t>()
                                : nullptr));
    }
  }
  void Backward() {
    if (!grads_) throw std::runtime_error(case_.name + ": no grads input");
    const roi::RoiArgs& args = call_.args;
    const TfcoDtype dtype = CoreDtype(dtype_);
    const void* rois = device_rois();
    if (args.attrs.bilinear()) {
      CheckCore(TfcoRoiAlignGrad(d_.core(), dtype, boxes_dtype_, &args,
                                 grads_->get<void>(), rois,
                                 grad_features_.get<void>()));
    } else {
      CheckCore(TfcoRoiPoolGrad(
          d_.core(), dtype, boxes_dtype_, &args, grads_->get<void>(), rois,
          args.attrs.kind == roi::RoiKind::kPool ? argmax_for_grad() : nullptr,
          grad_features_.get<void>()));
    }
  }

  // The outputs of the kernel the case names.
  std::map<std::string, Tensor> Outputs() const {
    std::map<std::string, Tensor> out;
    if (IsGrad(case_.op)) {
      out["grad_features"] =
          grad_features_.Download(dtype_, case_.Input("features").dims);
    } else {
      out["pooled"] = pooled_.Download(dtype_, call_.pooled_dims);
      if (call_.args.attrs.kind == roi::RoiKind::kPool) {
        out["argmax"] = argmax_.Download(DType::kInt32, call_.pooled_dims);
      }
    }
    return out;
  }

 private:
  static int64_t Elements(const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t v : dims) n *= v;
    return n;
  }
  // The op kernels copy the validated rois to the device, and wait, before
  // every launch; so does this, so that timings include it.
  const void* device_rois() {
    const std::vector<char>& host = case_.Input("rois").data;
    if (host.empty()) return rois_.get<void>();
    Check(cudaMemcpyAsync(rois_.get<char>(), host.data(), host.size(),
                          cudaMemcpyHostToDevice, d_.stream()),
          "cudaMemcpyAsync");
    Check(cudaStreamSynchronize(d_.stream()), "cudaStreamSynchronize");
    return rois_.get<void>();
  }
  const int32_t* argmax_for_grad() const {
    // RoiPoolGrad uses the argmax its forward wrote; a case that carries the
    // CPU forward's argmax uses that one, so both sides scatter alike.
    return (argmax_input_ ? argmax_input_.get() : &argmax_)->get<int32_t>();
  }

  const Case& case_;
  const GPUDevice& d_;
  RoiCall call_;
  DType dtype_;
  TfcoDtype boxes_dtype_;
  DeviceBuffer features_;
  DeviceBuffer rois_;
  DeviceBuffer pooled_;
  DeviceBuffer argmax_;
  DeviceBuffer grad_features_;
  std::unique_ptr<DeviceBuffer> grads_;
  std::unique_ptr<DeviceBuffer> argmax_input_;
};

std::map<std::string, Tensor> RunRoi(const Case& c, const GPUDevice& d) {
  RoiRunner runner(c, d);
  if (RoiRunner::IsGrad(c.op)) {
    runner.Backward();
  } else {
    runner.Forward();
  }
  d.synchronize();
  return runner.Outputs();
}

// RoiAlignGradBoxes and PsRoiAlignGradBoxes: the box gradient, [K, 5].
std::map<std::string, Tensor> RunRoiGradBoxes(const Case& c,
                                              const GPUDevice& d) {
  const std::string kind = c.op.substr(0, c.op.size() - strlen("GradBoxes"));
  const RoiCall call = MakeRoiCall(c, RoiKindOf(kind));
  const Tensor& features = c.Input("features");
  DeviceBuffer dfeatures(features), dgrads(c.Input("grads")),
      drois(c.Input("rois"));
  const int64_t k = call.args.shape.num_rois;
  const DType boxes = c.Input("rois").dtype;
  DeviceBuffer grad_rois = DeviceBuffer::Poisoned(k * 5 * SizeOf(boxes));
  CheckCore(TfcoRoiAlignGradBoxes(d.core(), CoreDtype(features.dtype),
                                  CoreDtype(boxes), &call.args,
                                  dgrads.get<void>(), dfeatures.get<void>(),
                                  drois.get<void>(), grad_rois.get<void>()));
  d.synchronize();
  return {{"grad_rois", grad_rois.Download(boxes, {k, 5})}};
}

// The box check of the XLA GPU lowering (TfcoRoiCheckBoxes).
std::map<std::string, Tensor> RunRoiCheckBoxes(const Case& c,
                                               const GPUDevice& d) {
  const Tensor& rois = c.Input("rois");
  const int64_t k = rois.dims[0];
  DeviceBuffer drois(rois);
  DeviceBuffer checked = DeviceBuffer::Poisoned(k * 5 * SizeOf(rois.dtype));
  CheckCore(TfcoRoiCheckBoxes(d.core(), CoreDtype(rois.dtype), k,
                              static_cast<int64_t>(c.Attr("batch")),
                              static_cast<float>(c.Attr("spatial_scale")),
                              drois.get<void>(), checked.get<void>()));
  d.synchronize();
  return {{"checked", checked.Download(rois.dtype, {k, 5})}};
}

const RegisterRunner kRoi({"RoiAlign", "RoiAlignGrad", "PsRoiAlign",
                           "PsRoiAlignGrad", "RoiPool", "RoiPoolGrad",
                           "PsRoiPool", "PsRoiPoolGrad"},
                          RunRoi, BenchCase<RoiRunner>);
const RegisterRunner kRoiGradBoxes({"RoiAlignGradBoxes", "PsRoiAlignGradBoxes"},
                                   RunRoiGradBoxes);
const RegisterRunner kRoiCheckBoxes({"RoiCheckBoxes"}, RunRoiCheckBoxes);

}  // namespace
}  // namespace gpu_check
