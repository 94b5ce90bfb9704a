// The decision behind TfcoGetGpuSupport (gpu_support.h), apart from the CUDA
// calls that gather its facts, so that tests can give it any machine.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_SUPPORT_CORE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_SUPPORT_CORE_H_

#include <string>
#include <vector>

namespace tensorflow {
namespace customops {

// A device's compute capability, e.g. {8, 6}.
struct Capability {
  int major;
  int minor;
};

struct GpuFacts {
  // What was compiled: CUDART_VERSION, the nvcc version that wrote the PTX
  // (same encoding), the SASS architectures (75 for sm_75) and the PTX's
  // (0 for none).
  int runtime_version = 0;
  int ptx_compiler_version = 0;
  std::vector<int> sass;
  int ptx = 0;
  // What the machine has: cudaDriverGetVersion (0: no driver), the
  // devices' capabilities, and a CUDA error that stopped listing them.
  int driver_version = 0;
  std::vector<Capability> devices;
  std::string error;
};

struct GpuDecision {
  bool usable = false;
  std::string reason;  // "" when usable
};

// The least cudaDriverGetVersion a CUDA runtime `runtime_version` runs on:
// CUDA's minor-version compatibility makes any driver of the runtime's major
// release enough, e.g. 13000 for every 13.x runtime.
int DriverFloor(int runtime_version);

// "13.0" for 13000.
std::string CudaVersionString(int version);

// "sm_75, sm_80, PTX compute_80".
std::string DescribeCode(const GpuFacts& facts);

GpuDecision DecideGpuSupport(const GpuFacts& facts);

// The test hook: the driver version and devices from the values of
// TFCO_FAKE_CUDA_DRIVER_VERSION (e.g. "12040", "0" for no driver) and
// TFCO_FAKE_CUDA_DEVICES (capabilities, e.g. "8.0,7.0"; null or "" for
// none) instead of the machine's. False, with `error` set, on a malformed
// value.
bool FakeGpuFacts(const char* driver_version, const char* devices,
                  GpuFacts* facts, std::string* error);

#if GOOGLE_CUDA
// The CUDA facts of this build and machine (gpu_support_gpu.cu.cc): only
// the driver and device attributes are queried, so no CUDA context is
// created. The devices are listed only where the driver is recent enough.
void QueryCompiledCuda(GpuFacts* facts);
void QueryCudaMachine(GpuFacts* facts);
#endif

}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_SUPPORT_CORE_H_
