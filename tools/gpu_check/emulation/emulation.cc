// The CUDA runtime of --config=cuda_emulation (include/cuda_runtime.h): one
// CUDA device, emulated on the CPU, so that the GPU check runs every GPU
// kernel of the library where there is no GPU.
//
// - Work runs when it is enqueued, in order, so every stream is always idle
//   but for its host callbacks, which run on a thread of their own, as CUDA's
//   do; work enqueued after a callback waits for it.
// - A kernel's blocks run one after another; each thread of a block is a
//   fiber that runs until it exits or reaches a barrier (__syncthreads, or a
//   warp's shuffle), so code that needs no barrier sees no order. Odd blocks
//   run their threads in reverse order. Threads of a block that wait at
//   different barriers are a kernel fault.
// - Device memory is host memory that host code cannot touch: outside
//   kernels, copies and fills it is mapped PROT_NONE, and a PROT_NONE page
//   follows each allocation, so a kernel reading or writing past its end,
//   or host code reading device memory, stops the process with a report of
//   where. New allocations hold 0xff bytes (NaN), as garbage would be there.
// - __trap() ends the kernel with "unspecified launch failure", which every
//   later call returns, as CUDA's sticky errors do.
// - Under --config=cuda_emulation_racecheck the kernels are ThreadSanitizer's
//   and each thread of a block is a fiber of its own to it, whose accesses
//   only a barrier of its block or warp orders against its block's other
//   threads. Blocks are ordered one after another (their shared memory is
//   one static here), so what it reports are the hazards within a block,
//   those compute-sanitizer's racecheck looks for.

#ifdef TFCO_EMULATION_RACECHECK
#include <sanitizer/tsan_interface.h>
#endif
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tools/gpu_check/emulation/cuda_code.h"
#include "tools/gpu_check/emulation/include/cuda_runtime.h"

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

struct TfcoEmulatedStream {
  int pending_callbacks = 0;
};

struct TfcoEmulatedEvent {
  bool timing = true;
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

namespace tfco_emulation {
namespace {

constexpr int kMultiprocessors = 132;
// The newest architecture the build has code for.
constexpr int kCapability = TFCO_CUDA_PTX != 0 ? TFCO_CUDA_PTX : 90;
constexpr unsigned kMaxThreads = 1024;
constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kAlignment = 256;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// --- Errors.

std::atomic<cudaError_t> sticky{cudaSuccess};
thread_local cudaError_t last_error = cudaSuccess;

cudaError_t Fail(cudaError_t error) {
  last_error = error;
  return error;
}

// --- Device memory.

struct Allocation {
  char* map;
  size_t data_pages;  // bytes of the mapping before its guard page
};

// Kernels, copies, fills and allocations, one at a time; it also guards the
// allocation table and the fault report's state.
std::mutex device_mutex;
std::map<const char*, Allocation> allocations;

void SetAccess(int protection) {
  for (const auto& [data, a] : allocations) {
    if (mprotect(a.map, a.data_pages, protection) != 0) {
      std::perror("CUDA emulation: mprotect");
      std::abort();
    }
  }
}

// Device memory is readable and writable while this lives.
class DeviceAccess {
 public:
  DeviceAccess() { SetAccess(PROT_READ | PROT_WRITE); }
  ~DeviceAccess() { SetAccess(PROT_NONE); }
};

// --- What ThreadSanitizer is told under the race check: which fiber runs,
// and what orders their accesses (a release and an acquire of an address).

namespace race {
#ifdef TFCO_EMULATION_RACECHECK
void* NewFiber() { return __tsan_create_fiber(0); }
void* Current() { return __tsan_get_current_fiber(); }
void SwitchTo(void* fiber) {
  __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
}
void Release(void* sync) { __tsan_release(sync); }
void Acquire(void* sync) { __tsan_acquire(sync); }
#else
void* NewFiber() { return nullptr; }
void* Current() { return nullptr; }
void SwitchTo(void*) {}
void Release(void*) {}
void Acquire(void*) {}
#endif
}  // namespace race

// --- Fibers.

// Saves the callee-saved registers and stack pointer of the running context
// in *from and resumes the one saved in `to`. glibc's swapcontext would also
// save the signal mask, a system call at each of the millions of switches.
extern "C" void TfcoEmulationSwitch(void** from, void* to);
asm(R"(
  .text
  .globl TfcoEmulationSwitch
  .type TfcoEmulationSwitch, @function
TfcoEmulationSwitch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size TfcoEmulationSwitch, .-TfcoEmulationSwitch
)");

enum class State {
  kRunnable,
  kAtBlockBarrier,
  kAtWarpBarrier,
  kDone,
  kTrapped
};

struct Fiber {
  void* context = nullptr;  // its saved stack pointer
  char* stack = nullptr;
  void* race = nullptr;  // its ThreadSanitizer context
  State state = State::kDone;
  uint3 index;
  unsigned linear = 0;
  // Barriers passed in this block: each barrier's release and acquire use
  // one of two addresses, alternately, so that a thread that runs on to the
  // next barrier before others resume does not order their accesses.
  unsigned block_barriers = 0;
  unsigned warp_barriers = 0;
};

struct Kernel {
  void (*body)(void*);
  void* closure;
  const char* what;
};

Kernel kernel;
std::vector<Fiber> fibers(kMaxThreads);
Fiber* current = nullptr;
void* scheduler = nullptr;
char warp_slots[kMaxThreads / 32][32][8];
// The launching thread's ThreadSanitizer context, and the addresses whose
// release and acquire order a block after the one before and the launch,
// and the threads at a barrier.
void* race_scheduler = nullptr;
char block_start, block_end;
char block_barrier[2];
char warp_barrier[kMaxThreads / 32][2];

[[noreturn]] void FiberMain() {
  race::Acquire(&block_start);
  kernel.body(kernel.closure);
  current->state = State::kDone;
  race::Release(&block_end);
  race::SwitchTo(race_scheduler);
  TfcoEmulationSwitch(&current->context, scheduler);
  std::abort();  // a finished fiber is never resumed
}

char* NewStack() {
  // A guard page below, where the stack would overflow into.
  void* map = mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED || mprotect(map, kPage, PROT_NONE) != 0) {
    std::perror("CUDA emulation: a fiber's stack");
    std::abort();
  }
  return static_cast<char*>(map) + kPage;
}

// A context that starts FiberMain on `stack`: six zero registers and its
// address, which TfcoEmulationSwitch pops, above them an empty return
// address, so FiberMain starts with the stack aligned as after a call.
void* StartContext(char* stack) {
  void** top = reinterpret_cast<void**>(stack + kStackBytes);
  top[-1] = nullptr;
  top[-2] = reinterpret_cast<void*>(&FiberMain);
  for (int i = 3; i <= 8; ++i) top[-i] = nullptr;
  return top - 8;
}

void SwitchTo(Fiber* f) {
  current = f;
  threadIdx = f->index;
  race::SwitchTo(f->race);
  TfcoEmulationSwitch(&scheduler, f->context);
  current = nullptr;
}

// Parks the running fiber in `state` until the scheduler resumes it.
void Park(State state) {
  if (current == nullptr) {
    std::fprintf(stderr, "CUDA emulation: a barrier outside a kernel\n");
    std::abort();
  }
  Fiber* self = current;
  self->state = state;
  char* barrier = nullptr;
  if (state == State::kAtBlockBarrier) {
    barrier = &block_barrier[self->block_barriers++ % 2];
  } else if (state == State::kAtWarpBarrier) {
    barrier = &warp_barrier[self->linear / 32][self->warp_barriers++ % 2];
  }
  if (barrier != nullptr) race::Release(barrier);
  race::SwitchTo(race_scheduler);
  TfcoEmulationSwitch(&self->context, scheduler);
  if (barrier != nullptr) race::Acquire(barrier);
}

void ReportBlock(const char* problem) {
  std::fprintf(stderr,
               "CUDA emulation: %s in block (%u, %u, %u) of a grid (%u, %u, "
               "%u) of blocks (%u, %u, %u): %s\n",
               problem, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x,
               gridDim.y, gridDim.z, blockDim.x, blockDim.y, blockDim.z,
               kernel.what);
}

// Runs the current block's threads to their end; false on a trap or
// threads waiting at different barriers.
bool RunBlock(unsigned threads, bool reverse) {
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = fibers[t];
    if (f.stack == nullptr) f.stack = NewStack();
    if (f.race == nullptr) f.race = race::NewFiber();
    f.context = StartContext(f.stack);
    f.state = State::kRunnable;
    f.block_barriers = 0;
    f.warp_barriers = 0;
    f.linear = t;
    f.index = {t % blockDim.x, t / blockDim.x % blockDim.y,
               t / (blockDim.x * blockDim.y)};
  }
  for (;;) {
    for (unsigned i = 0; i < threads; ++i) {
      Fiber& f = fibers[reverse ? threads - 1 - i : i];
      if (f.state != State::kRunnable) continue;
      SwitchTo(&f);
      if (f.state == State::kTrapped) return false;
    }
    bool released = false;
    unsigned live = 0, at_block = 0;
    for (unsigned w = 0; w * 32 < threads; ++w) {
      const unsigned end = std::min(threads, (w + 1) * 32);
      unsigned warp_live = 0, at_warp = 0;
      for (unsigned t = w * 32; t < end; ++t) {
        warp_live += fibers[t].state != State::kDone;
        at_warp += fibers[t].state == State::kAtWarpBarrier;
        at_block += fibers[t].state == State::kAtBlockBarrier;
      }
      live += warp_live;
      if (warp_live > 0 && at_warp == warp_live) {
        for (unsigned t = w * 32; t < end; ++t) {
          if (fibers[t].state == State::kAtWarpBarrier) {
            fibers[t].state = State::kRunnable;
          }
        }
        released = true;
      }
    }
    if (released) continue;
    if (live == 0) return true;
    if (at_block != live) {
      ReportBlock("threads wait at different barriers");
      return false;
    }
    for (unsigned t = 0; t < threads; ++t) {
      if (fibers[t].state == State::kAtBlockBarrier) {
        fibers[t].state = State::kRunnable;
      }
    }
  }
}

// --- Reports of memory faults.

void OnFault(int, siginfo_t* info, void*) {
  char message[1024];
  const char* address = static_cast<const char*>(info->si_addr);
  const char* what = "not device memory";
  for (const auto& [data, a] : allocations) {
    if (address >= a.map && address < a.map + a.data_pages) {
      what = "device memory, outside a kernel, copy or fill";
    } else if (address >= a.map + a.data_pages &&
               address < a.map + a.data_pages + kPage) {
      what = "past the end of a device allocation";
    }
  }
  for (const Fiber& f : fibers) {
    if (f.stack != nullptr && address >= f.stack - kPage && address < f.stack) {
      what = "a kernel thread's stack overflowed";
    }
  }
  int n;
  if (current != nullptr) {
    n = std::snprintf(message, sizeof(message),
                      "CUDA emulation: invalid access at %p (%s) by thread "
                      "(%u, %u, %u) of block (%u, %u, %u): %s\n",
                      info->si_addr, what, threadIdx.x, threadIdx.y,
                      threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z,
                      kernel.what);
  } else {
    n = std::snprintf(message, sizeof(message),
                      "CUDA emulation: invalid access at %p (%s) by host "
                      "code\n",
                      info->si_addr, what);
  }
  if (n > 0) {
    const ssize_t ignored =
        write(STDERR_FILENO, message,
              std::min(static_cast<size_t>(n), sizeof(message) - 1));
    (void)ignored;
  }
  signal(SIGSEGV, SIG_DFL);  // the access faults again, and ends the process
}

void InstallFaultReport() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_sigaction = OnFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, nullptr) == 0;
  }();
  (void)installed;
  // The report of a fiber's stack overflow needs a stack of its own, on the
  // thread that runs the kernels.
  thread_local const bool alternate_stack = [] {
    stack_t alternate = {};
    alternate.ss_size = 64 << 10;
    alternate.ss_sp = new char[alternate.ss_size];
    return sigaltstack(&alternate, nullptr) == 0;
  }();
  (void)alternate_stack;
}

// --- Streams and their host callbacks.

TfcoEmulatedStream null_stream;

// Never destroyed: its thread waits on it until the process ends.
struct CallbackQueue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<TfcoEmulatedStream*, std::function<void()>>> pending;
};
CallbackQueue& queue = *new CallbackQueue;

TfcoEmulatedStream* StreamOf(cudaStream_t stream) {
  return stream == nullptr ? &null_stream : stream;
}

void RunCallbacks() {
  std::unique_lock<std::mutex> lock(queue.mutex);
  for (;;) {
    queue.changed.wait(lock, [] { return !queue.pending.empty(); });
    auto [stream, fn] = std::move(queue.pending.front());
    queue.pending.pop_front();
    lock.unlock();
    fn();
    lock.lock();
    --stream->pending_callbacks;
    queue.changed.notify_all();
  }
}

// Work on `stream` starts after its callbacks have run.
void WaitForCallbacks(cudaStream_t stream) {
  TfcoEmulatedStream* s = StreamOf(stream);
  std::unique_lock<std::mutex> lock(queue.mutex);
  queue.changed.wait(lock, [s] { return s->pending_callbacks == 0; });
}

void AddCallback(cudaStream_t stream, std::function<void()> fn) {
  static const bool started = [] {
    std::thread(RunCallbacks).detach();
    return true;
  }();
  (void)started;
  std::lock_guard<std::mutex> lock(queue.mutex);
  ++StreamOf(stream)->pending_callbacks;
  queue.pending.emplace_back(StreamOf(stream), std::move(fn));
  queue.changed.notify_all();
}

// Copies and fills: where a stream is idle, as work runs when enqueued.
template <typename Fn>
cudaError_t OnDevice(cudaStream_t stream, Fn fn) {
  if (sticky != cudaSuccess) return sticky;
  WaitForCallbacks(stream);
  std::lock_guard<std::mutex> lock(device_mutex);
  DeviceAccess access;
  fn();
  return cudaSuccess;
}

}  // namespace

cudaError_t Launch(dim3 grid, dim3 block, cudaStream_t stream,
                   void (*body)(void*), void* closure, const char* what) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 ||
      grid.x > 0x7fffffffu || grid.y == 0 || grid.y > 65535 || grid.z == 0 ||
      grid.z > 65535) {
    return Fail(cudaErrorInvalidConfiguration);
  }
  if (sticky != cudaSuccess) return sticky;
  InstallFaultReport();
  WaitForCallbacks(stream);
  std::lock_guard<std::mutex> lock(device_mutex);
  DeviceAccess access;
  kernel = {body, closure, what};
  gridDim = grid;
  blockDim = block;
  race_scheduler = race::Current();
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        const bool odd = (x + y + z) % 2 == 1;
        race::Acquire(&block_end);
        race::Release(&block_start);
        if (!RunBlock(static_cast<unsigned>(threads), odd)) {
          // Threads left at a trap or barrier: what they did comes before
          // whatever the host does next.
          for (unsigned t = 0; t < threads; ++t) {
            if (fibers[t].state == State::kDone) continue;
            race::SwitchTo(fibers[t].race);
            race::Release(&block_end);
            race::SwitchTo(race_scheduler);
          }
          race::Acquire(&block_end);
          // Like a fault on a GPU, it surfaces at the next synchronisation.
          sticky = cudaErrorLaunchFailure;
          return cudaSuccess;
        }
      }
    }
  }
  race::Acquire(&block_end);
  return cudaSuccess;
}

void SyncThreads() { Park(State::kAtBlockBarrier); }
void SyncWarp() { Park(State::kAtWarpBarrier); }

void Trap() {
  Park(State::kTrapped);
  std::abort();  // never resumed
}

long long Clock() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int LaneId() { return static_cast<int>(current->linear % 32); }

void* WarpSlot(int lane) { return warp_slots[current->linear / 32][lane]; }

}  // namespace tfco_emulation

using tfco_emulation::Fail;
using tfco_emulation::sticky;

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
  }
  return "unrecognized error code";
}

cudaError_t cudaGetLastError() {
  const cudaError_t error =
      sticky != cudaSuccess ? sticky.load() : tfco_emulation::last_error;
  tfco_emulation::last_error = cudaSuccess;
  return error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : Fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  *prop = {};
  std::snprintf(prop->name, sizeof(prop->name),
                "CUDA emulated on the CPU (tools/gpu_check/emulation)");
  prop->major = tfco_emulation::kCapability / 10;
  prop->minor = tfco_emulation::kCapability % 10;
  prop->multiProcessorCount = tfco_emulation::kMultiprocessors;
  prop->maxThreadsPerBlock = tfco_emulation::kMaxThreads;
  prop->maxThreadsPerMultiProcessor = 2 * tfco_emulation::kMaxThreads;
  prop->sharedMemPerBlock = 48 << 10;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr,
                                   int device) {
  cudaDeviceProp prop;
  const cudaError_t status = cudaGetDeviceProperties(&prop, device);
  if (status != cudaSuccess) return status;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = prop.multiProcessorCount;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = prop.major;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = prop.minor;
      return cudaSuccess;
  }
  return Fail(cudaErrorInvalidValue);
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  using tfco_emulation::kPage;
  using tfco_emulation::RoundUp;
  *pointer = nullptr;
  if (sticky != cudaSuccess) return sticky;
  if (bytes == 0) return cudaSuccess;
  tfco_emulation::InstallFaultReport();
  const size_t used = RoundUp(bytes, tfco_emulation::kAlignment);
  const size_t data_pages = RoundUp(used, kPage);
  void* map = mmap(nullptr, data_pages + kPage, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return Fail(cudaErrorMemoryAllocation);
  char* data = static_cast<char*>(map) + data_pages - used;
  std::lock_guard<std::mutex> lock(tfco_emulation::device_mutex);
  if (mprotect(map, data_pages, PROT_READ | PROT_WRITE) != 0) {
    munmap(map, data_pages + kPage);
    return Fail(cudaErrorMemoryAllocation);
  }
  std::memset(data, 0xff, used);
  mprotect(map, data_pages, PROT_NONE);
  tfco_emulation::allocations[data] = {static_cast<char*>(map), data_pages};
  *pointer = data;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(tfco_emulation::device_mutex);
  const auto it =
      tfco_emulation::allocations.find(static_cast<const char*>(pointer));
  if (it == tfco_emulation::allocations.end()) {
    return Fail(cudaErrorInvalidValue);
  }
  munmap(it->second.map, it->second.data_pages + tfco_emulation::kPage);
  tfco_emulation::allocations.erase(it);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  *pointer =
      std::aligned_alloc(tfco_emulation::kAlignment,
                         tfco_emulation::RoundUp(std::max<size_t>(bytes, 1),
                                                 tfco_emulation::kAlignment));
  return *pointer == nullptr ? Fail(cudaErrorMemoryAllocation) : cudaSuccess;
}

cudaError_t cudaFreeHost(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind, cudaStream_t stream) {
  return tfco_emulation::OnDevice(stream,
                                  [&] { std::memmove(dst, src, bytes); });
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                       cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes,
                            cudaStream_t stream) {
  return tfco_emulation::OnDevice(stream,
                                  [&] { std::memset(pointer, value, bytes); });
}

cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  return cudaMemsetAsync(pointer, value, bytes, nullptr);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new TfcoEmulatedStream;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  // CUDA lets enqueued work finish first.
  tfco_emulation::WaitForCallbacks(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  tfco_emulation::WaitForCallbacks(stream);
  return sticky;
}

cudaError_t cudaStreamGetDevice(cudaStream_t, int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event == nullptr ? Fail(cudaErrorInvalidResourceHandle)
                          : sticky.load();
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream,
                                  cudaStreamCallback_t callback, void* data,
                                  unsigned int) {
  // CUDA runs it after a fault too, with the error.
  tfco_emulation::AddCallback(
      stream, [stream, callback, data] { callback(stream, sticky, data); });
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                               void* data) {
  if (sticky != cudaSuccess) return sticky;
  tfco_emulation::AddCallback(stream, [fn, data] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new TfcoEmulatedEvent;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new TfcoEmulatedEvent;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  tfco_emulation::WaitForCallbacks(stream);
  event->recorded = true;
  event->at = std::chrono::steady_clock::now();
  return sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event == nullptr ? Fail(cudaErrorInvalidResourceHandle)
                          : sticky.load();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return cudaEventQuery(event);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  if (start == nullptr || end == nullptr || !start->timing || !end->timing ||
      !start->recorded || !end->recorded) {
    return Fail(cudaErrorInvalidResourceHandle);
  }
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}
