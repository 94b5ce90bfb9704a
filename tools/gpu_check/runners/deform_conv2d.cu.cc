// DeformableConv2d's GPU kernels and its gradient's: the geometry comes in
// the attrs.

#include <utility>

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

TfcoDeformConv2dArgs DeformArgs(const Case& c) {
  TfcoDeformConv2dArgs a;
  const std::pair<int64_t*, const char*> fields[] = {
      {&a.n, "n"},
      {&a.h, "h"},
      {&a.w, "w"},
      {&a.c, "c"},
      {&a.kh, "kh"},
      {&a.kw, "kw"},
      {&a.o, "o"},
      {&a.ho, "ho"},
      {&a.wo, "wo"},
      {&a.stride_h, "stride_h"},
      {&a.stride_w, "stride_w"},
      {&a.dilation_h, "dilation_h"},
      {&a.dilation_w, "dilation_w"},
      {&a.pad_top, "pad_top"},
      {&a.pad_left, "pad_left"},
      {&a.groups, "groups"},
      {&a.offset_groups, "offset_groups"}};
  for (const auto& [field, name] : fields) {
    *field = static_cast<int64_t>(c.Attr(name));
  }
  a.nchw = static_cast<int>(c.Attr("nchw"));
  a.use_mask = static_cast<int>(c.Attr("use_mask"));
  return a;
}

// Device copies of a DeformableConv2d case's tensors and the calls of its two
// kernels. Shared by the check and the benchmark.
class DeformRunner {
 public:
  DeformRunner(const Case& c, const GPUDevice& d)
      : case_(c),
        d_(d),
        a_(DeformArgs(c)),
        dtype_(c.Input("input").dtype),
        x_(c.Input("input")),
        filter_(c.Input("filter")),
        offset_(c.Input("offset")),
        mask_(c.Input("mask")),
        y_(DeviceBuffer::Poisoned(a_.n * a_.ho * a_.wo * a_.o *
                                  SizeOf(dtype_))),
        gx_(DeviceBuffer::Poisoned(c.Input("input").data.size())),
        gfilter_(DeviceBuffer::Poisoned(c.Input("filter").data.size())),
        goffset_(DeviceBuffer::Poisoned(c.Input("offset").data.size())),
        gmask_(DeviceBuffer::Poisoned(c.Input("mask").data.size())) {
    const auto dy = c.inputs.find("grad_output");
    if (dy != c.inputs.end()) dy_.reset(new DeviceBuffer(dy->second));
  }

  bool has_grads() const { return dy_ != nullptr; }

  void Forward() {
    CheckCore(TfcoDeformableConv2d(
        d_.core(), CoreDtype(dtype_), &a_, x_.get<void>(), filter_.get<void>(),
        offset_.get<void>(), mask_.get<void>(), y_.get<void>()));
  }
  void Backward() {
    if (!dy_) throw std::runtime_error(case_.name + ": no grad_output input");
    CheckCore(TfcoDeformableConv2dGrad(
        d_.core(), CoreDtype(dtype_), &a_, x_.get<void>(), filter_.get<void>(),
        offset_.get<void>(), mask_.get<void>(), dy_->get<void>(),
        gx_.get<void>(), gfilter_.get<void>(), goffset_.get<void>(),
        gmask_.get<void>()));
  }

  std::map<std::string, Tensor> Outputs() const {
    if (case_.op == "DeformableConv2d") {
      const std::vector<int64_t> dims =
          a_.nchw ? std::vector<int64_t>{a_.n, a_.o, a_.ho, a_.wo}
                  : std::vector<int64_t>{a_.n, a_.ho, a_.wo, a_.o};
      return {{"output", y_.Download(dtype_, dims)}};
    }
    std::map<std::string, Tensor> out = {
        {"grad_input", gx_.Download(dtype_, case_.Input("input").dims)},
        {"grad_filter", gfilter_.Download(dtype_, case_.Input("filter").dims)},
        {"grad_offset", goffset_.Download(dtype_, case_.Input("offset").dims)}};
    if (a_.use_mask) {
      out["grad_mask"] = gmask_.Download(dtype_, case_.Input("mask").dims);
    }
    return out;
  }

 private:
  const Case& case_;
  const GPUDevice& d_;
  TfcoDeformConv2dArgs a_;
  DType dtype_;
  DeviceBuffer x_, filter_, offset_, mask_, y_, gx_, gfilter_, goffset_, gmask_;
  std::unique_ptr<DeviceBuffer> dy_;
};

std::map<std::string, Tensor> RunDeformableConv2d(const Case& c,
                                                  const GPUDevice& d) {
  DeformRunner runner(c, d);
  if (c.op == "DeformableConv2d") {
    runner.Forward();
  } else {
    runner.Backward();
  }
  d.synchronize();
  return runner.Outputs();
}

const RegisterRunner kDeformConv2d({"DeformableConv2d", "DeformableConv2dGrad"},
                                   RunDeformableConv2d,
                                   BenchCase<DeformRunner>);

}  // namespace
}  // namespace gpu_check
