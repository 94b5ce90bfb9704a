// The decision whether the GPU kernels are registered (gpu_facts.h),
// on machines given by hand: drivers older and newer than the runtime needs,
// architectures with and without code, no driver, no device. CHECK failures
// abort, which fails the test.

#include "tensorflow_customops/core/kernels/portable/gpu_support.h"

#include <cstdio>
#include <string>

#include "tensorflow/core/platform/logging.h"
#include "tensorflow_customops/core/kernels/portable/gpu_facts.h"

namespace tensorflow {
namespace customops {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The default build's code: nvcc 13.0, sm_75 to sm_90 and PTX for 9.0.
GpuFacts Cuda13Build(int driver_version) {
  GpuFacts f;
  f.runtime_version = 13000;
  f.ptx_compiler_version = 13000;
  f.sass = {75, 80, 89, 90};
  f.ptx = 90;
  f.driver_version = driver_version;
  return f;
}

// The CUDA 12 route's code (--config=cuda12): the CUDA 12.9 runtime, sm_60
// to sm_90 from clang 16, and PTX for 9.0 of the ISA of CUDA 11.8.
GpuFacts Cuda12Build(int driver_version) {
  GpuFacts f;
  f.runtime_version = 12090;
  f.ptx_compiler_version = 11080;
  f.sass = {60, 70, 80, 89, 90};
  f.ptx = 90;
  f.driver_version = driver_version;
  return f;
}

void CheckUsable(const GpuFacts& f, const char* what) {
  const GpuDecision d = DecideGpuSupport(f);
  CHECK(d.usable) << what << ": " << d.reason;
  CHECK(d.reason.empty()) << what;
}

std::string CheckUnusable(const GpuFacts& f, const char* what) {
  const GpuDecision d = DecideGpuSupport(f);
  CHECK(!d.usable) << what;
  CHECK(!d.reason.empty()) << what;
  return d.reason;
}

void TestVersions() {
  CHECK_EQ(DriverFloor(13000), 13000);
  CHECK_EQ(DriverFloor(13020), 13000);
  CHECK_EQ(DriverFloor(12090), 12000);
  CHECK_EQ(CudaVersionString(12040), "12.4");
  CHECK_EQ(CudaVersionString(13000), "13.0");
  CHECK_EQ(DescribeCode(Cuda13Build(0)),
           "sm_75, sm_80, sm_89, sm_90, "
           "PTX compute_90");
}

void TestDriver() {
  GpuFacts f = Cuda13Build(0);
  f.devices = {{8, 0}};
  CHECK_EQ(CheckUnusable(f, "no driver"), "no CUDA driver");

  // A 575 driver (CUDA 12.9) under a CUDA 13.0 runtime.
  f.driver_version = 12090;
  std::string reason = CheckUnusable(f, "old driver");
  CHECK(Contains(reason, "supports CUDA 12.9")) << reason;
  CHECK(Contains(reason, "built with the CUDA 13.0 runtime")) << reason;
  CHECK(Contains(reason,
                 "a driver for CUDA 13.0 or newer (NVIDIA 580 or "
                 "newer)"))
      << reason;

  // Minor-version compatibility: a 13.2 runtime runs on a 13.0 driver.
  f.runtime_version = 13020;
  f.driver_version = 13000;
  CheckUsable(f, "13.2 runtime, 13.0 driver");
  // A newer major release's driver runs older runtimes.
  f.driver_version = 14000;
  CheckUsable(f, "newer driver");

  // A CUDA 12 build: TensorFlow's floor.
  GpuFacts g = Cuda13Build(12020);
  g.runtime_version = 12090;
  g.ptx_compiler_version = 12090;
  g.devices = {{8, 6}};
  CheckUsable(g, "12.9 runtime, 12.2 driver");
  g.driver_version = 11080;
  reason = CheckUnusable(g, "CUDA 11.8 driver");
  CHECK(Contains(reason, "CUDA 12.0 or newer (NVIDIA 525.60.13 or newer)"))
      << reason;
}

void TestDevices() {
  GpuFacts f = Cuda13Build(13000);
  CHECK_EQ(CheckUnusable(f, "no device"), "no CUDA device");
  f.error = "unknown error";
  CHECK_EQ(CheckUnusable(f, "listing failed"),
           "CUDA could not list the GPUs: unknown error");
  f.error.clear();

  // Cubins run on their major version at their minor or above.
  for (const Capability c :
       {Capability{7, 5}, Capability{8, 0}, Capability{8, 6}, Capability{8, 9},
        Capability{9, 0}}) {
    f.devices = {c};
    CheckUsable(f, "device with a cubin");
  }
  // Newer architectures compile the PTX.
  f.devices = {{10, 0}, {12, 0}};
  CheckUsable(f, "PTX");

  // Volta has neither: no sm_7x cubin below 7.5, and the PTX is for 9.0.
  f.devices = {{8, 0}, {7, 0}};
  std::string reason = CheckUnusable(f, "Volta");
  CHECK_EQ(reason,
           "no code in the library for GPU 1 (compute capability 7.0): it "
           "holds sm_75, sm_80, sm_89, sm_90, PTX compute_90");

  // PTX from a newer nvcc than the driver cannot be compiled.
  f.ptx_compiler_version = 13010;
  f.devices = {{8, 9}};
  CheckUsable(f, "cubin, older driver than the PTX");
  f.devices = {{8, 9}, {12, 0}};
  reason = CheckUnusable(f, "PTX newer than the driver");
  CHECK(Contains(reason, "GPU 1 (compute capability 12.0)")) << reason;
  CHECK(Contains(reason,
                 "its PTX, from CUDA 13.1, is newer than the "
                 "driver's CUDA 13.0"))
      << reason;

  // No PTX: nothing beyond the cubins' major versions.
  f = Cuda13Build(13000);
  f.ptx = 0;
  f.devices = {{10, 0}};
  reason = CheckUnusable(f, "no PTX");
  CHECK(Contains(reason, "it holds sm_75, sm_80, sm_89, sm_90")) << reason;
}

// TensorFlow's floor: a 525.60.13 driver (CUDA 12.0) runs the CUDA 12.9
// runtime's kernels on every GPU from Pascal on, Blackwell by the PTX.
void TestCuda12Build() {
  GpuFacts f = Cuda12Build(12000);
  f.devices = {{6, 0}, {6, 1}, {7, 0}, {7, 5},  {8, 0},
               {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}};
  CheckUsable(f, "CUDA 12.0 driver, Pascal to Blackwell");
  f.driver_version = 11080;
  CHECK(Contains(CheckUnusable(f, "CUDA 11.8 driver"),
                 "built with the CUDA 12.9 runtime, need a driver for CUDA "
                 "12.0 or newer (NVIDIA 525.60.13 or newer)"));
  f.driver_version = 12000;
  f.devices = {{5, 2}};
  CHECK_EQ(CheckUnusable(f, "Maxwell"),
           "no code in the library for GPU 0 (compute capability 5.2): it "
           "holds sm_60, sm_70, sm_80, sm_89, sm_90, PTX compute_90");
}

void TestFakeFacts() {
  GpuFacts f = Cuda13Build(0);
  std::string error;
  CHECK(FakeGpuFacts("12040", "8.0,7.5", &f, &error)) << error;
  CHECK_EQ(f.driver_version, 12040);
  CHECK_EQ(f.devices.size(), 2u);
  CHECK_EQ(f.devices[1].major, 7);
  CHECK_EQ(f.devices[1].minor, 5);
  CHECK(FakeGpuFacts("13000", "12.0", &f, &error)) << error;
  CHECK_EQ(f.devices.size(), 1u);
  CHECK_EQ(f.devices[0].major, 12);
  CHECK(FakeGpuFacts("0", nullptr, &f, &error)) << error;
  CHECK_EQ(f.driver_version, 0);
  CHECK(f.devices.empty());
  CHECK(FakeGpuFacts("13000", "", &f, &error)) << error;
  CHECK(f.devices.empty());

  for (const char* bad : {"", "12.4", "x", "-1", "13000x"}) {
    CHECK(!FakeGpuFacts(bad, "8.0", &f, &error)) << bad;
    CHECK(Contains(error, "TFCO_FAKE_CUDA_DRIVER_VERSION=")) << error;
  }
  for (const char* bad : {"8", "8.", "8.0,x", "8.10", "+8.0", "a.0"}) {
    CHECK(!FakeGpuFacts("13000", bad, &f, &error)) << bad;
    CHECK(Contains(error, "TFCO_FAKE_CUDA_DEVICES=")) << error;
  }
}

// What this process decided: consistent whatever the machine.
void TestThisMachine() {
  const TfcoGpuSupport* s = TfcoGetGpuSupport();
  CHECK(s == TfcoGetGpuSupport());
  CHECK_EQ(s->usable != 0, std::string(s->reason).empty()) << s->reason;
  if (!s->compiled) {
    CHECK(!s->usable);
    CHECK_EQ(std::string(s->reason),
             "this copy was built without CUDA kernels");
    CHECK_EQ(s->runtime_version, 0);
    return;
  }
  CHECK_GE(s->runtime_version, 11000);
  CHECK_EQ(s->driver_floor, DriverFloor(s->runtime_version));
  CHECK(Contains(s->code, "sm_")) << s->code;
}

}  // namespace
}  // namespace customops
}  // namespace tensorflow

int main() {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  TestVersions();
  TestDriver();
  TestDevices();
  TestCuda12Build();
  TestFakeFacts();
  TestThisMachine();
  std::printf("PASSED\n");
  return 0;
}
