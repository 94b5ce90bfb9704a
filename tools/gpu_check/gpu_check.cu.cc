// Runs every GPU kernel of the library on the cases of a case file and
// compares the results with the CPU kernels' outputs stored there. Needs a
// CUDA GPU and nothing of TensorFlow at run time: the kernels are the kernel
// core's (core/kernels/portable/api.h), called through the same C entry points
// the op library calls.
//
//   gpu_check CASES [--outputs FILE]   one line per case, then
//                                      "N passed, N failed"; exit 1 on failure
//   gpu_check --bench CASES [--repeats N]
//                                      times the RoI and DeformableConv2d
//                                      cases of CASES (forward, and
//                                      forward+backward when they carry
//                                      "grads" or "grad_output"), one JSON
//                                      object per line
//
// Without a CUDA device it says so and exits with status 3.

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"
#include "tensorflow_customops/core/kernels/clip_by_global_norm/clip_by_global_norm_op.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"
#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_op.h"
#include "tensorflow_customops/core/kernels/portable/gpu_support.h"
#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"
#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"
#include "tensorflow_customops/core/kernels/zero_out/zero_out_op.h"
#include "tools/gpu_check/case_file.h"

namespace gpu_check {
namespace {

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(status));
  }
}

// The stream every kernel runs on, as the kernel core's device.
class GPUDevice {
 public:
  explicit GPUDevice(cudaStream_t stream)
      : stream_(stream), device_{nullptr, stream} {}
  cudaStream_t stream() const { return stream_; }
  const TfcoDevice* core() const { return &device_; }
  void synchronize() const {
    Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  cudaStream_t stream_;
  TfcoDevice device_;
};

// Throws the kernel core's error, if any.
void CheckCore(TfcoError error) {
  if (error != nullptr) throw std::runtime_error(error);
}

TfcoDtype CoreDtype(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return TFCO_HALF;
    case DType::kBfloat16:
      return TFCO_BFLOAT16;
    case DType::kFloat:
      return TFCO_FLOAT;
    case DType::kDouble:
      return TFCO_DOUBLE;
    case DType::kInt32:
      return TFCO_INT32;
    case DType::kInt64:
      return TFCO_INT64;
    case DType::kInt8:
      return TFCO_INT8;
    case DType::kUint8:
      return TFCO_UINT8;
  }
  throw std::runtime_error("unknown dtype");
}

// Device memory; outputs start as 0xff bytes (NaN, or -1), so an element a
// kernel fails to write cannot pass as a right answer.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) Check(cudaMalloc(&data_, bytes_), "cudaMalloc");
  }
  explicit DeviceBuffer(const Tensor& t) : DeviceBuffer(t.data.size()) {
    if (bytes_ > 0) {
      Check(cudaMemcpy(data_, t.data.data(), bytes_, cudaMemcpyHostToDevice),
            "cudaMemcpy to device");
    }
  }
  static DeviceBuffer Poisoned(size_t bytes) {
    DeviceBuffer b(bytes);
    if (bytes > 0) Check(cudaMemset(b.data_, 0xff, bytes), "cudaMemset");
    return b;
  }
  DeviceBuffer(DeviceBuffer&& other)
      : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  template <typename T>
  T* get() const {
    return static_cast<T*>(data_);
  }

  Tensor Download(DType dtype, std::vector<int64_t> dims) const {
    Tensor t;
    t.dtype = dtype;
    t.dims = std::move(dims);
    t.data.resize(t.NumElements() * SizeOf(dtype));
    if (t.data.size() > bytes_) throw std::logic_error("download too large");
    if (!t.data.empty()) {
      Check(cudaMemcpy(t.data.data(), data_, t.data.size(),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy to host");
    }
    return t;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// --- RoI ops.

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

// --- MatrixMul.

std::map<std::string, Tensor> RunMatrixMul(const Case& c, const GPUDevice& d) {
  const Tensor& a = c.Input("a");
  const Tensor& b = c.Input("b");
  const bool ta = c.Attr("transpose_a") != 0;
  const bool tb = c.Attr("transpose_b") != 0;
  if (a.dims.size() != 2 || b.dims.size() != 2 || a.dtype != b.dtype) {
    throw std::runtime_error("a and b must be matrices of one dtype");
  }
  const int64_t m = ta ? a.dims[1] : a.dims[0];
  const int64_t n = tb ? b.dims[0] : b.dims[1];
  DeviceBuffer da(a), db(b);
  DeviceBuffer product = DeviceBuffer::Poisoned(m * n * SizeOf(a.dtype));
  CheckCore(TfcoMatrixMul(d.core(), CoreDtype(a.dtype), da.get<void>(),
                          a.dims[0], a.dims[1], db.get<void>(), b.dims[0],
                          b.dims[1], ta, tb, product.get<void>()));
  d.synchronize();
  return {{"product", product.Download(a.dtype, {m, n})}};
}

// --- ClipByGlobalNorm and its gradient.

// Inputs named prefix0, prefix1, ... on the device.
std::vector<DeviceBuffer> Uploads(const Case& c, const std::string& prefix,
                                  int n) {
  std::vector<DeviceBuffer> buffers;
  for (int i = 0; i < n; ++i) {
    buffers.emplace_back(c.Input(prefix + std::to_string(i)));
  }
  return buffers;
}

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

// --- CheckNumericsN: the per-tensor flags its kernel reports.

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
  DeviceBuffer scratch = DeviceBuffer::Poisoned(n * sizeof(int));
  Tensor flags;
  flags.dtype = DType::kInt32;
  flags.dims = {n};
  flags.data.resize(n * sizeof(int));
  CheckCore(TfcoNumericFlags(d.core(), n, dtypes.data(), tensors.data(),
                             sizes.data(), scratch.get<int>(),
                             reinterpret_cast<int*>(flags.data.data())));
  return {{"flags", flags}};
}

// --- ZeroOut.

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

// --- DeformableConv2d and its gradient: the geometry comes in the attrs.

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

std::map<std::string, Tensor> Run(const Case& c, const GPUDevice& d) {
  static const std::map<std::string,
                        std::function<std::map<std::string, Tensor>(
                            const Case&, const GPUDevice&)>>
      runners = {
          {"RoiAlign", RunRoi},
          {"RoiAlignGrad", RunRoi},
          {"PsRoiAlign", RunRoi},
          {"PsRoiAlignGrad", RunRoi},
          {"RoiAlignGradBoxes", RunRoiGradBoxes},
          {"PsRoiAlignGradBoxes", RunRoiGradBoxes},
          {"RoiCheckBoxes", RunRoiCheckBoxes},
          {"RoiPool", RunRoi},
          {"RoiPoolGrad", RunRoi},
          {"PsRoiPool", RunRoi},
          {"PsRoiPoolGrad", RunRoi},
          {"MatrixMul", RunMatrixMul},
          {"ClipByGlobalNorm", RunClip},
          {"ClipByGlobalNormGrad", RunClip},
          {"CheckNumericsN", RunCheckNumerics},
          {"ZeroOut", RunZeroOut},
          {"DeformableConv2d", RunDeformableConv2d},
          {"DeformableConv2dGrad", RunDeformableConv2d},
      };
  const auto it = runners.find(c.op);
  if (it == runners.end()) throw std::runtime_error("unknown op " + c.op);
  std::map<std::string, Tensor> outputs = it->second(c, d);
  // A fault inside a kernel surfaces at the next synchronisation.
  Check(cudaStreamSynchronize(d.stream()), "kernel");
  return outputs;
}

// --- Benchmark: median milliseconds of the RoI and DeformableConv2d kernels,
// timed with events.

double MedianMs(const GPUDevice& d, int repeats,
                const std::function<void()>& step) {
  for (int i = 0; i < 3; ++i) step();
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    Check(cudaEventRecord(start, d.stream()), "cudaEventRecord");
    step();
    Check(cudaEventRecord(stop, d.stream()), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms;
    Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One JSON line: the median forward time, and forward+backward when the case
// carries the backward's input.
template <typename Runner>
std::string BenchCase(const Case& c, int repeats, const GPUDevice& d) {
  Runner runner(c, d);
  std::ostringstream line;
  line << "{\"case\": \"" << c.name
       << "\", \"fwd_ms\": " << MedianMs(d, repeats, [&] { runner.Forward(); });
  if (runner.has_grads()) {
    line << ", \"fwd_bwd_ms\": " << MedianMs(d, repeats, [&] {
      runner.Forward();
      runner.Backward();
    });
  }
  Check(cudaStreamSynchronize(d.stream()), "kernel");
  return line.str() + "}";
}

int Bench(const std::vector<Case>& cases, int repeats, const GPUDevice& d) {
  for (const Case& c : cases) {
    std::cout << (c.op == "DeformableConv2d"
                      ? BenchCase<DeformRunner>(c, repeats, d)
                      : BenchCase<RoiRunner>(c, repeats, d))
              << std::endl;
  }
  return 0;
}

// Whether `ordinal`'s primary CUDA context is active, from the driver API
// (the runtime has no call that asks without creating one).
bool PrimaryContextActive(int ordinal) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) return false;
  using DeviceGet = int (*)(int*, int);
  using GetState = int (*)(int, unsigned*, int*);
  auto device_get = reinterpret_cast<DeviceGet>(dlsym(cuda, "cuDeviceGet"));
  auto get_state =
      reinterpret_cast<GetState>(dlsym(cuda, "cuDevicePrimaryCtxGetState"));
  int device = 0, active = 0;
  unsigned flags = 0;
  return device_get != nullptr && get_state != nullptr &&
         device_get(&device, ordinal) == 0 &&
         get_state(device, &flags, &active) == 0 && active != 0;
}

int Main(int argc, char** argv) {
  std::string cases_path, outputs_path;
  bool bench = false;
  int repeats = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--outputs" && i + 1 < argc) {
      outputs_path = argv[++i];
    } else if (arg == "--bench") {
      bench = true;
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (cases_path.empty() && arg[0] != '-') {
      cases_path = arg;
    } else {
      cases_path.clear();
      break;
    }
  }
  if (cases_path.empty()) {
    std::cerr << "usage: gpu_check CASES [--outputs FILE]\n"
                 "       gpu_check --bench CASES [--repeats N]\n";
    return 2;
  }
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::cerr << "gpu_check: no CUDA device ("
              << (status != cudaSuccess ? cudaGetErrorString(status)
                                        : "none found")
              << ")\n";
    return 3;
  }
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::cerr << "device: " << prop.name << ", compute capability " << prop.major
            << "." << prop.minor << ", " << prop.multiProcessorCount
            << " multiprocessors; CUDA driver " << driver << ", runtime "
            << runtime << "\n";

  // The op library's decision (docs/gpu.md, "Driver and architecture"):
  // here, where the kernels run, it must register them, and deciding must
  // not have created a CUDA context.
  const TfcoGpuSupport* support = TfcoGetGpuSupport();
  const bool context = PrimaryContextActive(0);
  std::cerr << "op library's GPU kernels: "
            << (support->usable ? "registered" : "left out: ")
            << support->reason << " (code " << support->code
            << "; driver floor " << support->driver_floor << ")"
            << (context ? "; deciding created a CUDA context" : "") << "\n";
  const bool decided_well = support->usable && !context;

  const std::vector<Case> cases = ReadCases(cases_path);
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const GPUDevice d(stream);
  if (bench) return decided_well ? Bench(cases, repeats, d) : 1;

  std::map<std::string, Case> actual;
  std::map<std::string, std::string> errors;
  for (const Case& c : cases) {
    try {
      Case out;
      out.name = c.name;
      out.op = c.op;
      out.outputs = Run(c, d);
      actual[c.name] = std::move(out);
    } catch (const std::exception& e) {
      errors[c.name] = e.what();
    }
  }
  const int failed = Report(cases, actual, errors, std::cout);
  if (!outputs_path.empty()) {
    std::vector<Case> written;
    for (auto& [name, c] : actual) written.push_back(std::move(c));
    WriteCases(outputs_path, written);
  }
  return failed == 0 && decided_well ? 0 : 1;
}

}  // namespace
}  // namespace gpu_check

int main(int argc, char** argv) {
  try {
    return gpu_check::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpu_check: " << e.what() << "\n";
    return 2;
  }
}
