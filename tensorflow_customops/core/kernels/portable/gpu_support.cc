#include "tensorflow_customops/core/kernels/portable/gpu_support.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "tensorflow_customops/core/kernels/portable/cuda_code.h"
#include "tensorflow_customops/core/kernels/portable/gpu_facts.h"

namespace tensorflow {
namespace customops {

namespace {

// The NVIDIA driver release that first supports a CUDA major version on
// Linux (NVIDIA's minor-version compatibility table), for the messages.
const char* NvidiaDriverFor(int cuda_major) {
  switch (cuda_major) {
    case 11:
      return "450.80.02";
    case 12:
      return "525.60.13";
    case 13:
      return "580";
    default:
      return nullptr;
  }
}

std::string DescribeFloor(int runtime_version) {
  const int floor = DriverFloor(runtime_version);
  std::string s = "a driver for CUDA " + CudaVersionString(floor) + " or newer";
  if (const char* nvidia = NvidiaDriverFor(floor / 1000)) {
    s += std::string(" (NVIDIA ") + nvidia + " or newer)";
  }
  return s;
}

std::string DescribeCapability(const Capability& c) {
  return std::to_string(c.major) + "." + std::to_string(c.minor);
}

bool HasCode(const GpuFacts& facts, const Capability& c) {
  // A cubin runs on its own major version, at its minor or above.
  for (int sass : facts.sass) {
    if (sass / 10 == c.major && sass % 10 <= c.minor) return true;
  }
  // PTX is compiled by the driver for its architecture or a newer one, if
  // the driver is at least as new as the nvcc that wrote it.
  return facts.ptx != 0 && c.major * 10 + c.minor >= facts.ptx &&
         facts.driver_version >= facts.ptx_compiler_version;
}

bool ParseInt(const char* s, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

int DriverFloor(int runtime_version) { return runtime_version / 1000 * 1000; }

std::string CudaVersionString(int version) {
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

std::string DescribeCode(const GpuFacts& facts) {
  std::string s;
  for (int sass : facts.sass) {
    if (!s.empty()) s += ", ";
    s += "sm_" + std::to_string(sass);
  }
  if (facts.ptx != 0) {
    if (!s.empty()) s += ", ";
    s += "PTX compute_" + std::to_string(facts.ptx);
  }
  return s;
}

GpuDecision DecideGpuSupport(const GpuFacts& facts) {
  GpuDecision d;
  const std::string built = "the GPU kernels, built with the CUDA " +
                            CudaVersionString(facts.runtime_version) +
                            " runtime, need " +
                            DescribeFloor(facts.runtime_version);
  if (facts.driver_version <= 0) {
    d.reason = "no CUDA driver";
    return d;
  }
  if (facts.driver_version < DriverFloor(facts.runtime_version)) {
    d.reason = "the NVIDIA driver supports CUDA " +
               CudaVersionString(facts.driver_version) + ", and " + built;
    return d;
  }
  if (!facts.error.empty()) {
    d.reason = "CUDA could not list the GPUs: " + facts.error;
    return d;
  }
  if (facts.devices.empty()) {
    d.reason = "no CUDA device";
    return d;
  }
  // TensorFlow registers kernels per device type, not per GPU: one GPU
  // without code rules out all.
  std::string missing;
  for (size_t i = 0; i < facts.devices.size(); ++i) {
    if (HasCode(facts, facts.devices[i])) continue;
    if (!missing.empty()) missing += ", ";
    missing += "GPU " + std::to_string(i) + " (compute capability " +
               DescribeCapability(facts.devices[i]) + ")";
  }
  if (!missing.empty()) {
    d.reason = "no code in the library for " + missing + ": it holds " +
               DescribeCode(facts);
    if (facts.ptx != 0 && facts.driver_version < facts.ptx_compiler_version) {
      d.reason += ", and its PTX, from CUDA " +
                  CudaVersionString(facts.ptx_compiler_version) +
                  ", is newer than the driver's CUDA " +
                  CudaVersionString(facts.driver_version);
    }
    return d;
  }
  d.usable = true;
  return d;
}

bool FakeGpuFacts(const char* driver_version, const char* devices,
                  GpuFacts* facts, std::string* error) {
  long version = 0;
  if (!ParseInt(driver_version, 0, 1000000, &version)) {
    *error = std::string("TFCO_FAKE_CUDA_DRIVER_VERSION=") + driver_version +
             ": not a CUDA version such as 12040";
    return false;
  }
  facts->driver_version = static_cast<int>(version);
  facts->devices.clear();
  facts->error.clear();
  std::string list = devices == nullptr ? "" : devices;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    const size_t dot = item.find('.');
    long major = 0, minor = 0;
    if (dot == std::string::npos ||
        !ParseInt(item.substr(0, dot).c_str(), 1, 99, &major) ||
        !ParseInt(item.substr(dot + 1).c_str(), 0, 9, &minor) ||
        item.find_first_not_of("0123456789.") != std::string::npos) {
      *error = "TFCO_FAKE_CUDA_DEVICES=" + list +
               ": not a list of compute capabilities such as 8.0,7.5";
      return false;
    }
    facts->devices.push_back(
        {static_cast<int>(major), static_cast<int>(minor)});
    start = end + 1;
  }
  return true;
}

}  // namespace customops
}  // namespace tensorflow

namespace {

using tensorflow::customops::GpuFacts;

struct GpuSupport {
  std::string code;
  std::string reason;
  TfcoGpuSupport api = {};
};

GpuSupport* Compute() {
  namespace tfco = tensorflow::customops;
  auto* s = new GpuSupport;
#if GOOGLE_CUDA
  GpuFacts facts;
  facts.sass = {TFCO_CUDA_SASS};
  facts.ptx = TFCO_CUDA_PTX;
  tfco::QueryCompiledCuda(&facts);
  const char* fake_driver = std::getenv("TFCO_FAKE_CUDA_DRIVER_VERSION");
  std::string error;
  tfco::GpuDecision decision;
  if (fake_driver == nullptr) {
    tfco::QueryCudaMachine(&facts);
    decision = tfco::DecideGpuSupport(facts);
  } else if (tfco::FakeGpuFacts(fake_driver,
                                std::getenv("TFCO_FAKE_CUDA_DEVICES"), &facts,
                                &error)) {
    decision = tfco::DecideGpuSupport(facts);
  } else {
    decision.reason = error;
  }
  s->code = tfco::DescribeCode(facts);
  s->reason = decision.reason;
  s->api.compiled = 1;
  s->api.usable = decision.usable;
  s->api.runtime_version = facts.runtime_version;
  s->api.driver_floor = tfco::DriverFloor(facts.runtime_version);
  s->api.driver_version = facts.driver_version;
#else
  s->reason = "this copy was built without CUDA kernels";
#endif
  s->api.code = s->code.c_str();
  s->api.reason = s->reason.c_str();
  return s;
}

}  // namespace

extern "C" const TfcoGpuSupport* TfcoGetGpuSupport(void) {
  static const GpuSupport* const support = Compute();
  return &support->api;
}
