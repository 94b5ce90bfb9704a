// Runs every GPU kernel of the library on the cases of a case file and
// compares the results with the CPU kernels' outputs stored there. Needs a
// CUDA GPU and nothing of TensorFlow at run time: the kernels are the kernel
// core's (core/kernels/portable/api.h), called through the same C entry points
// the op library calls, and the XLA custom calls' CUDA handlers, called as
// XLA calls them (xla_ffi.h).
//
//   gpu_check CASES [--outputs FILE]   one line per case, then
//                                      "N passed, N failed"; exit 1 on failure
//   gpu_check --bench CASES [--repeats N]
//                                      times the cases of CASES, whose ops'
//                                      runners must have a benchmark:
//                                      forward, and forward+backward when they
//                                      carry the backward's input; one JSON
//                                      object per line
//   gpu_check --list                   the ops it has runners for, one a line,
//                                      "xla:<target>" for the custom calls'
//                                      handlers (no GPU needed)
//   gpu_check --stream-done [fault]    TfcoWhenStreamDone, which the async
//                                      op kernels finish by: it must not
//                                      hold up the op's stream, and (fault:
//                                      a kernel that traps, the process's
//                                      last CUDA work) must still call back,
//                                      with CUDA's error
//
// Without a CUDA device it says so and exits with status 3. Each op family's
// runners are in runners/<family>.cu.cc.

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow_customops/core/kernels/portable/gpu_support.h"
#include "tools/gpu_check/case_file.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

// The case's runner (runners/), then a synchronisation: a fault inside a
// kernel surfaces there.
Outputs Run(const Case& c, const GPUDevice& d) {
  const auto it = Runners().find(c.op);
  if (it == Runners().end())
    throw std::runtime_error("no runner for op " + c.op);
  Outputs outputs = it->second.run(c, d);
  Check(cudaStreamSynchronize(d.stream()), "kernel");
  return outputs;
}

int Bench(const std::vector<Case>& cases, int repeats, const GPUDevice& d) {
  for (const Case& c : cases) {
    const auto it = Runners().find(c.op);
    if (it == Runners().end() || it->second.bench == nullptr) {
      throw std::runtime_error("no benchmark for op " + c.op);
    }
    std::cout << it->second.bench(c, repeats, d) << std::endl;
  }
  return 0;
}

// --- TfcoWhenStreamDone's own check (--stream-done).

// A CPU pool whose `schedule` holds CUDA's callback thread until Release():
// while it does, the callback has not returned, and only its own stream may
// wait for it.
class HeldPool {
 public:
  HeldPool() {
    pool_.pool = this;
    pool_.num_threads = 1;
    pool_.pool_threads = 1;
    pool_.schedule = [](void* self, void (*fn)(void*), void* arg) {
      static_cast<HeldPool*>(self)->Hold(fn, arg);
    };
    pool_.current_thread_id = [](void*) { return -1; };
  }
  const TfcoThreadPool* pool() const { return &pool_; }
  bool WaitEntered(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, limit, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  void Hold(void (*fn)(void*), void* arg) {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
    std::thread(fn, arg).detach();
  }

  TfcoThreadPool pool_ = {};
  std::mutex mu_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool released_ = false;
};

// What TfcoWhenStreamDone's fn saw.
struct Called {
  std::mutex mu;
  std::condition_variable done;
  bool called = false;
  std::string error;

  static void Fn(void* arg, TfcoError error) {
    Called* self = static_cast<Called*>(arg);
    std::lock_guard<std::mutex> lock(self->mu);
    self->called = true;
    self->error = error == nullptr ? "" : error;
    self->done.notify_all();
  }
  bool Wait(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu);
    return done.wait_for(lock, limit, [this] { return called; });
  }
};

// Spins for `cycles` clock cycles, so the host has enqueued what follows
// before it traps.
__global__ void SpinThenTrap(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  __trap();
}

// Whether an event recorded on `stream` completes within `limit`.
bool Completes(cudaStream_t stream, std::chrono::seconds limit) {
  cudaEvent_t event;
  Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
        "cudaEventCreate");
  Check(cudaEventRecord(event, stream), "cudaEventRecord");
  const auto end = std::chrono::steady_clock::now() + limit;
  cudaError_t status;
  while ((status = cudaEventQuery(event)) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  cudaEventDestroy(event);
  return status == cudaSuccess;
}

int StreamDoneCheck(bool fault) {
#if TFCO_CUDA_EMULATION
  // The emulation runs a kernel when it is launched, so the fault would come
  // before the callback is enqueued, an order a GPU does not show.
  if (fault) {
    std::cout << "SKIP stream-done/after a device fault: the emulation runs "
                 "the faulting kernel before the callback is enqueued\n"
                 "0 passed, 0 failed\n";
    return 0;
  }
#endif
  constexpr std::chrono::seconds kLimit(10);
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  HeldPool held;
  const TfcoDevice device{held.pool(), stream};
  Called called;
  if (fault) {
    long long cycles = 100 * 1000 * 1000;
    void* args[] = {&cycles};
    Check(cudaLaunchKernel(SpinThenTrap, dim3(1), dim3(1), args, 0, stream),
          "cudaLaunchKernel");
  }
  CheckCore(TfcoWhenStreamDone(&device, &Called::Fn, &called));
  bool ok = true;
  if (!fault) {
    ok = held.WaitEntered(kLimit);
    std::cout << (ok ? "PASS" : "FAIL")
              << " stream-done/called back while the stream ran on\n";
    const bool ran_on = ok && Completes(stream, kLimit);
    std::cout << (ran_on ? "PASS" : "FAIL")
              << " stream-done/the op's stream does not wait for the "
                 "callback\n";
    ok = ok && ran_on;
  }
  held.Release();
  const bool called_back = called.Wait(kLimit);
  const bool error_as_expected = called_back && called.error.empty() != fault;
  std::cout << (error_as_expected ? "PASS" : "FAIL") << " stream-done/"
            << (fault ? "after a device fault, fn ran with CUDA's error"
                      : "fn ran without error")
            << (called_back
                    ? ": " + (called.error.empty() ? "no error" : called.error)
                    : ": fn did not run")
            << "\n";
  ok = ok && error_as_expected;
  std::cout << (ok ? "1 passed, 0 failed" : "0 passed, 1 failed") << "\n";
  return ok ? 0 : 1;
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
  AddXlaRunners();
  std::string cases_path, outputs_path;
  bool bench = false, stream_done = false, fault = false;
  int repeats = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--outputs" && i + 1 < argc) {
      outputs_path = argv[++i];
    } else if (arg == "--list") {
      for (const auto& entry : Runners()) std::cout << entry.first << "\n";
      return 0;
    } else if (arg == "--stream-done") {
      stream_done = true;
      fault = i + 1 < argc && std::string(argv[i + 1]) == "fault";
      i += fault;
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
  if (cases_path.empty() == !stream_done) {
    std::cerr << "usage: gpu_check CASES [--outputs FILE]\n"
                 "       gpu_check --bench CASES [--repeats N]\n"
                 "       gpu_check --stream-done [fault]\n"
                 "       gpu_check --list\n";
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
  if (stream_done) return StreamDoneCheck(fault);

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
