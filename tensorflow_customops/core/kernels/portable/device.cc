#include "tensorflow_customops/core/kernels/portable/device.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <utility>

namespace tensorflow {
namespace customops {

namespace {

struct ErrorState {
  bool failed = false;
  std::string message;
};

ErrorState& Error() {
  thread_local ErrorState state;
  return state;
}

}  // namespace

void CallerThreadPool::Schedule(std::function<void()> fn) {
  auto* task = new std::function<void()>(std::move(fn));
  pool_.schedule(
      pool_.pool,
      [](void* arg) {
        auto* f = static_cast<std::function<void()>*>(arg);
        (*f)();
        delete f;
      },
      task);
}

void CPUDevice::parallelFor(
    Eigen::Index n, const Eigen::TensorOpCost& cost,
    std::function<void(Eigen::Index, Eigen::Index)> f) const {
  typedef Eigen::TensorCostModel<Eigen::ThreadPoolDevice> CostModel;
  if (n <= 0) return;
  const int threads = n == 1 ? 1 : CostModel::numThreads(n, cost, numThreads());
  if (threads <= 1) {
    f(0, n);
    return;
  }
  // As Eigen's: at most four blocks a thread, none cheaper than a task.
  const double min_block = std::ceil(1 / CostModel::taskSize(1, cost));
  const Eigen::Index block = std::min<Eigen::Index>(
      n, std::max<Eigen::Index>(
             (n + 4 * numThreads() - 1) / (4 * numThreads()),
             static_cast<Eigen::Index>(std::min<double>(min_block, n))));
  // Shared by the caller and its helpers; the last of them to let go
  // deletes it. (A reference count by hand: std::shared_ptr's would import
  // glibc 2.32's __libc_single_threaded, above the wheel's glibc floor.)
  struct Work {
    std::function<void(Eigen::Index, Eigen::Index)>* f;
    Eigen::Index n, block, blocks;
    std::atomic<Eigen::Index> next{1};
    std::atomic<int> users;
    std::mutex mu;
    std::condition_variable all_done;
    Eigen::Index done = 0;

    // Runs blocks until none is left; called by every thread.
    void Run(Eigen::Index first) {
      Eigen::Index ran = 0;
      for (Eigen::Index b = first; b < blocks; b = next.fetch_add(1)) {
        (*f)(b * block, std::min(n, (b + 1) * block));
        ++ran;
      }
      if (ran == 0) return;
      std::lock_guard<std::mutex> lock(mu);
      done += ran;
      if (done == blocks) all_done.notify_all();
    }
    void Release() {
      if (users.fetch_sub(1) == 1) delete this;
    }
  };
  Work* work = new Work;
  work->f = &f;
  work->n = n;
  work->block = block;
  work->blocks = (n + block - 1) / block;
  const Eigen::Index helpers =
      std::min<Eigen::Index>(work->blocks, threads) - 1;
  work->users = static_cast<int>(helpers) + 1;
  for (Eigen::Index i = 0; i < helpers; ++i) {
    // A helper that starts after the last block was taken touches only
    // `work`, which outlives it.
    getPool()->Schedule([work] {
      work->Run(work->next.fetch_add(1));
      work->Release();
    });
  }
  work->Run(0);
  {
    std::unique_lock<std::mutex> lock(work->mu);
    work->all_done.wait(lock, [&] { return work->done == work->blocks; });
  }
  work->Release();
}

void RecordError(const std::string& message) {
  ErrorState& e = Error();
  if (e.failed) return;
  e.failed = true;
  e.message = message;
}

void ClearError() { Error().failed = false; }

void NoKernelFor(const char* op, TfcoDtype dtype) {
  RecordError(std::string(op) + ": no kernel for element type " +
              std::to_string(static_cast<int>(dtype)));
}

TfcoError CurrentError() {
  const ErrorState& e = Error();
  return e.failed ? e.message.c_str() : nullptr;
}

}  // namespace customops
}  // namespace tensorflow

namespace {

// Runs fn(d) for a GPU device, and refuses the CPU: both entry points below
// exist for results that the host reads from device memory.
template <typename Fn>
TfcoError OnGpuOnly(const char* op, const TfcoDevice* device, Fn&& fn) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunOnDevice(op, device, [&](const auto& d) {
    if constexpr (std::is_same<std::decay_t<decltype(d)>, GPUDevice>::value) {
      fn(d);
    } else {
      RecordError(std::string(op) + ": the device is not a GPU");
    }
  });
}

}  // namespace

extern "C" TfcoError TfcoCopyToHost(const TfcoDevice* device, const void* gpu,
                                    void* host, int64_t bytes) {
  return OnGpuOnly("CopyToHost", device, [&](const auto& d) {
    tensorflow::customops::CopyToHostAsync(d, host, gpu, bytes);
  });
}

extern "C" TfcoError TfcoWhenStreamDone(const TfcoDevice* device, TfcoDoneFn fn,
                                        void* arg) {
  return OnGpuOnly("WhenStreamDone", device, [&](const auto& d) {
    tensorflow::customops::WhenStreamDone(d, *device->cpu, fn, arg);
  });
}
