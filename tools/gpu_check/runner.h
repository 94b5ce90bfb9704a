// The GPU check's shared pieces: the device and its memory, the kernel
// core's error and dtype conversions, and the table of runners. Each op
// family's runners live in runners/<family>.cu.cc and add themselves to the
// table (RegisterRunner), so a new family is a new file there.

#ifndef TOOLS_GPU_CHECK_RUNNER_H_
#define TOOLS_GPU_CHECK_RUNNER_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow_customops/core/kernels/portable/api.h"
#include "tools/gpu_check/case_file.h"

namespace gpu_check {

inline void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(status));
  }
}

// The stream every kernel runs on, as the portable kernels' device. Its CPU
// pool, which only takes stream callbacks (TfcoWhenStreamDone), runs each on
// a thread of its own.
class GPUDevice {
 public:
  explicit GPUDevice(cudaStream_t stream) : stream_(stream) {
    pool_.num_threads = 1;
    pool_.pool_threads = 1;
    pool_.schedule = [](void*, void (*fn)(void*), void* arg) {
      std::thread(fn, arg).detach();
    };
    pool_.current_thread_id = [](void*) { return -1; };
    device_ = {&pool_, stream};
  }
  GPUDevice(const GPUDevice&) = delete;
  GPUDevice& operator=(const GPUDevice&) = delete;

  cudaStream_t stream() const { return stream_; }
  const TfcoDevice* core() const { return &device_; }
  void synchronize() const {
    Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  cudaStream_t stream_;
  TfcoThreadPool pool_ = {};
  TfcoDevice device_;
};

// Throws the portable kernels' error, if any.
inline void CheckCore(TfcoError error) {
  if (error != nullptr) throw std::runtime_error(error);
}

inline TfcoDtype CoreDtype(DType dtype) {
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

// Page-locked host memory, which TfcoCopyToHost copies into without waiting.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) {
    if (bytes > 0) Check(cudaMallocHost(&data_, bytes), "cudaMallocHost");
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { cudaFreeHost(data_); }

  template <typename T>
  T* get() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

// How the op kernels read results on the host without waiting: Then(d, fn)
// has the portable kernels run fn(error) on a pool thread once the GPU has
// passed everything enqueued on d's stream (TfcoWhenStreamDone; error is
// null, or the stream's); Wait() waits until fn has run. One call in flight.
class HostCheck {
 public:
  void Then(const GPUDevice& d, std::function<void(TfcoError)> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_) throw std::logic_error("HostCheck: a call is in flight");
      pending_ = true;
      fn_ = std::move(fn);
    }
    const TfcoError error =
        TfcoWhenStreamDone(d.core(), &HostCheck::Done, this);
    if (error != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = false;
      throw std::runtime_error(error);
    }
  }
  bool pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_;
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return !pending_; });
  }

 private:
  static void Done(void* arg, TfcoError error) {
    HostCheck* check = static_cast<HostCheck*>(arg);
    check->fn_(error);
    std::lock_guard<std::mutex> lock(check->mu_);
    check->pending_ = false;
    check->done_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable done_;
  bool pending_ = false;
  std::function<void(TfcoError)> fn_;
};

// Inputs named prefix0, prefix1, ... on the device.
inline std::vector<DeviceBuffer> Uploads(const Case& c,
                                         const std::string& prefix, int n) {
  std::vector<DeviceBuffer> buffers;
  for (int i = 0; i < n; ++i) {
    buffers.emplace_back(c.Input(prefix + std::to_string(i)));
  }
  return buffers;
}

using Outputs = std::map<std::string, Tensor>;

// Runs a case's kernel and returns its outputs, synchronised.
using RunFn = Outputs (*)(const Case&, const GPUDevice&);
// One benchmark line (BenchCase) for a case; null where an op has none.
using BenchFn = std::string (*)(const Case&, int, const GPUDevice&);

struct Runner {
  RunFn run;
  BenchFn bench;
};

// Op name (as in the case file) -> its runner.
inline std::map<std::string, Runner>& Runners() {
  static std::map<std::string, Runner> runners;
  return runners;
}

// Adds a runner "xla:<target>" for every XLA custom call's CUDA handler
// (xla_runner.cu.cc); the handlers register as the program starts, so the
// runners are added once main runs.
void AddXlaRunners();

// A static RegisterRunner in a runners/ file adds its ops to the table. Two
// files claiming one op is a programming error, caught at start-up.
struct RegisterRunner {
  RegisterRunner(std::initializer_list<const char*> ops, RunFn run,
                 BenchFn bench = nullptr) {
    for (const char* op : ops) {
      if (!Runners().emplace(op, Runner{run, bench}).second) {
        throw std::logic_error(std::string("two runners for ") + op);
      }
    }
  }
};

// --- Benchmark: median milliseconds of a kernel, timed with events.

inline double MedianMs(const GPUDevice& d, int repeats,
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

}  // namespace gpu_check

#endif  // TOOLS_GPU_CHECK_RUNNER_H_
