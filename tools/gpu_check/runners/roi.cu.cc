// The RoI family's GPU kernels: forward, backward, box gradient, and the
// box check of the XLA GPU lowering; each op as its GPU OpKernel runs it,
// the asynchronous check of the boxes included.

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

// The index of the first box in `rois` that fails roi::RoiOk, or -1.
template <typename B>
int64_t FirstBadBox(const B* rois, int64_t num_rois, int64_t batch,
                    float spatial_scale) {
  for (int64_t k = 0; k < num_rois; ++k) {
    if (!roi::RoiOk(rois + 5 * k, batch, spatial_scale)) return k;
  }
  return -1;
}

// A case's boxes in device memory, and the GPU OpKernels' sequence around a
// kernel (roi_glue.cc, RunOnGpu): the boxes copied to page-locked host
// memory, checked on the device into `checked_` (TfcoRoiCheckBoxes), the
// kernel on the checked boxes, and the host's check of its copy once the
// stream has passed them all, which finds the box whose error the op
// raises. Each call in flight has a copy of its own.
class OpBoxes {
 public:
  OpBoxes(const Case& c, const roi::RoiArgs& args, const GPUDevice& d)
      : d_(d),
        args_(args),
        host_(c.Input("rois")),
        boxes_dtype_(CoreDtype(host_.dtype)),
        rois_(host_),
        checked_(host_.data.size()) {}
  ~OpBoxes() {
    for (auto& call : calls_) call->check.Wait();
  }

  // Runs launch(boxes) as the OpKernel does.
  void Run(const std::function<void(const void*)>& launch) {
    const int64_t k = args_.shape.num_rois;
    if (k == 0) {  // no value to check
      launch(rois_.get<void>());
      return;
    }
    Call& call = FreeCall();
    CheckCore(TfcoCopyToHost(d_.core(), rois_.get<void>(),
                             call.host.get<void>(), host_.data.size()));
    CheckCore(TfcoRoiCheckBoxes(d_.core(), boxes_dtype_, k, args_.shape.batch,
                                args_.attrs.spatial_scale, rois_.get<void>(),
                                checked_.get<void>()));
    launch(checked_.get<void>());
    call.check.Then(d_, [this, &call, k](TfcoError error) {
      call.error = error == nullptr ? "" : error;
      const float scale = args_.attrs.spatial_scale;
      call.bad_box = boxes_dtype_ == TFCO_DOUBLE
                         ? FirstBadBox(call.host.get<double>(), k,
                                       args_.shape.batch, scale)
                         : FirstBadBox(call.host.get<float>(), k,
                                       args_.shape.batch, scale);
    });
    last_ = &call;
  }

  // After every call has finished: throws unless the last call's host check
  // found the box the case's CPU error names (attr bad_box), or none when
  // the case has no such attr.
  void CheckLast(const Case& c) {
    if (last_ == nullptr) return;
    last_->check.Wait();
    if (!last_->error.empty()) throw std::runtime_error(last_->error);
    const auto want = c.attrs.find("bad_box");
    const int64_t expected =
        want == c.attrs.end() ? -1 : static_cast<int64_t>(want->second);
    if (last_->bad_box != expected) {
      throw std::runtime_error("the host check of the boxes found box " +
                               std::to_string(last_->bad_box) +
                               ", the CPU kernel's error names " +
                               std::to_string(expected));
    }
  }

 private:
  struct Call {
    explicit Call(size_t bytes) : host(bytes) {}
    PinnedBuffer host;
    HostCheck check;
    int64_t bad_box = -1;
    std::string error;
  };

  // A call whose host copy is free: the benchmark keeps several in flight.
  Call& FreeCall() {
    for (auto& call : calls_) {
      if (!call->check.pending()) return *call;
    }
    calls_.emplace_back(new Call(host_.data.size()));
    return *calls_.back();
  }

  const GPUDevice& d_;
  const roi::RoiArgs args_;
  const Tensor& host_;
  TfcoDtype boxes_dtype_;
  DeviceBuffer rois_;
  DeviceBuffer checked_;
  std::vector<std::unique_ptr<Call>> calls_;
  Call* last_ = nullptr;
};

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
        boxes_(c, call_.args, d),
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

  // argmax is RoiPool's output and RoiPoolGrad's input only.
  void Forward() {
    const roi::RoiArgs& args = call_.args;
    const auto entry = args.attrs.bilinear() ? TfcoRoiAlign : TfcoRoiPool;
    boxes_.Run([&](const void* rois) {
      CheckCore(entry(d_.core(), CoreDtype(dtype_), boxes_dtype_, &args,
                      features_.get<void>(), rois, pooled_.get<void>(),
                      args.attrs.kind == roi::RoiKind::kPool
                          ? argmax_.get<int32_t>()
                          : nullptr));
    });
  }
  void Backward() {
    if (!grads_) throw std::runtime_error(case_.name + ": no grads input");
    const roi::RoiArgs& args = call_.args;
    const auto entry =
        args.attrs.bilinear() ? TfcoRoiAlignGrad : TfcoRoiPoolGrad;
    boxes_.Run([&](const void* rois) {
      CheckCore(entry(
          d_.core(), CoreDtype(dtype_), boxes_dtype_, &args,
          grads_->get<void>(), rois,
          args.attrs.kind == roi::RoiKind::kPool ? argmax_for_grad() : nullptr,
          grad_features_.get<void>()));
    });
  }
  void CheckBoxes() { boxes_.CheckLast(case_); }

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
  OpBoxes boxes_;
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
  runner.CheckBoxes();
  return runner.Outputs();
}

// RoiAlignGradBoxes and PsRoiAlignGradBoxes: the box gradient, [K, 5].
std::map<std::string, Tensor> RunRoiGradBoxes(const Case& c,
                                              const GPUDevice& d) {
  const std::string kind = c.op.substr(0, c.op.size() - strlen("GradBoxes"));
  const RoiCall call = MakeRoiCall(c, RoiKindOf(kind));
  const Tensor& features = c.Input("features");
  DeviceBuffer dfeatures(features), dgrads(c.Input("grads"));
  const int64_t k = call.args.shape.num_rois;
  const DType boxes = c.Input("rois").dtype;
  DeviceBuffer grad_rois = DeviceBuffer::Poisoned(k * 5 * SizeOf(boxes));
  OpBoxes op_boxes(c, call.args, d);
  op_boxes.Run([&](const void* rois) {
    CheckCore(TfcoRoiAlignGradBoxes(d.core(), CoreDtype(features.dtype),
                                    CoreDtype(boxes), &call.args,
                                    dgrads.get<void>(), dfeatures.get<void>(),
                                    rois, grad_rois.get<void>()));
  });
  d.synchronize();
  op_boxes.CheckLast(c);
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
