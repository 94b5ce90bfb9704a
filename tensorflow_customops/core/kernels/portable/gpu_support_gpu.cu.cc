// The CUDA side of gpu_support.cc. Compiled by nvcc under --config=cuda
// (clang 16 under --config=cuda12).

#if GOOGLE_CUDA

#include <cuda_runtime_api.h>

#include <string>

#include "tensorflow_customops/core/kernels/portable/gpu_facts.h"

namespace tensorflow {
namespace customops {

void QueryCompiledCuda(GpuFacts* facts) {
  facts->runtime_version = CUDART_VERSION;
#ifdef TFCO_PTX_CUDA_VERSION
  // clang (--config=cuda12) writes PTX of an older ISA than its CUDA
  // toolkit's; the build names the CUDA release of that ISA.
  facts->ptx_compiler_version = TFCO_PTX_CUDA_VERSION;
#else
  facts->ptx_compiler_version =
      __CUDACC_VER_MAJOR__ * 1000 + __CUDACC_VER_MINOR__ * 10;
#endif
}

void QueryCudaMachine(GpuFacts* facts) {
  // 0 when libcuda cannot be loaded.
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  facts->driver_version = driver;
  if (driver < DriverFloor(facts->runtime_version)) return;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice) {
    cudaGetLastError();
    return;
  }
  for (int i = 0; status == cudaSuccess && i < count; ++i) {
    Capability c = {0, 0};
    status =
        cudaDeviceGetAttribute(&c.major, cudaDevAttrComputeCapabilityMajor, i);
    if (status == cudaSuccess) {
      status = cudaDeviceGetAttribute(&c.minor,
                                      cudaDevAttrComputeCapabilityMinor, i);
    }
    if (status == cudaSuccess) facts->devices.push_back(c);
  }
  if (status != cudaSuccess) {
    facts->error = cudaGetErrorString(status);
    // Not sticky, but the op kernels must not see it as theirs.
    cudaGetLastError();
  }
}

}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
