// The CUDA runtime as the CPU emulation of tools/gpu_check/emulation sees it
// (--config=cuda_emulation, docs/gpu.md "The GPU check on the CPU"): the
// host compiler compiles the *.cu.cc files against this header instead of
// CUDA's, and emulation.cc runs their kernels on the CPU, every thread of a
// block a fiber of its own, so that __syncthreads and warp shuffles behave as
// on a GPU. Only what the library and tools/gpu_check use is here; anything
// else fails to compile rather than run differently.

#ifndef TOOLS_GPU_CHECK_EMULATION_INCLUDE_CUDA_RUNTIME_H_
#define TOOLS_GPU_CHECK_EMULATION_INCLUDE_CUDA_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#define TFCO_CUDA_EMULATION 1
// The CUDA release whose runtime is emulated: the driver floor of the
// library's decision (gpu_facts.h) is its major release.
#define CUDART_VERSION 13000
// The PTX's ISA is as new as the runtime (gpu_support_gpu.cu.cc).
#define TFCO_PTX_CUDA_VERSION CUDART_VERSION
#define CUDART_CB

// Device code is host code here. A block's threads run one at a time on one
// host thread (emulation.cc), so a block's __shared__ memory is a static of
// its kernel.
#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
};

// Macros, as CUDA's: Eigen takes cudaStreamDefault for the null stream.
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02

typedef struct TfcoEmulatedStream* cudaStream_t;
typedef struct TfcoEmulatedEvent* cudaEvent_t;
typedef void (*cudaStreamCallback_t)(cudaStream_t, cudaError_t, void*);
typedef void (*cudaHostFn_t)(void*);

// The fields Eigen's GPU device (included by the portable kernels) names.
struct cudaDeviceProp {
  char name[256];
  int major;
  int minor;
  int multiProcessorCount;
  int maxThreadsPerBlock;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerBlock;
};

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
};

// CUDA's vector types, as aligned as on a GPU (16-byte loads).
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
struct __attribute__((aligned(16))) double2 {
  double x, y;
};

// The running thread's coordinates, set by the scheduler at every switch.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

// --- The emulation's entry points (emulation.cc).
namespace tfco_emulation {

// Runs `body` (which calls the kernel) for every thread of the grid; `what`
// names the launch in reports.
cudaError_t Launch(dim3 grid, dim3 block, cudaStream_t stream,
                   void (*body)(void*), void* closure, const char* what);
void SyncThreads();
void SyncWarp();
[[noreturn]] void Trap();
long long Clock();
int LaneId();
// The calling thread's slot in its warp's exchange (8 bytes).
void* WarpSlot(int lane);

template <typename... Params, size_t... I>
void CallKernel(void (*kernel)(Params...), void** args,
                std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<Params>>*>(
      args[I])...);
}

}  // namespace tfco_emulation

// --- Device functions.

// The clobbers keep the compiler from holding a block's shared memory (a
// static it sees no other function use) in registers across a barrier.
inline void __syncthreads() {
  asm volatile("" ::: "memory");
  tfco_emulation::SyncThreads();
  asm volatile("" ::: "memory");
}
[[noreturn]] inline void __trap() { tfco_emulation::Trap(); }
inline long long clock64() { return tfco_emulation::Clock(); }

// A warp's lanes exchange through their slots between two warp barriers;
// a lane whose source is in a later segment of `width` lanes keeps its own
// value, as on a GPU.
template <typename T>
T __shfl_xor_sync(unsigned int, T var, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "shuffles of up to 8 bytes");
  const int lane = tfco_emulation::LaneId();
  std::memcpy(tfco_emulation::WarpSlot(lane), &var, sizeof(T));
  tfco_emulation::SyncWarp();
  const int source = lane ^ lane_mask;
  T result = var;
  if (source < (lane / width + 1) * width && source < 32) {
    std::memcpy(&result, tfco_emulation::WarpSlot(source), sizeof(T));
  }
  tfco_emulation::SyncWarp();
  return result;
}

// Threads switch only at barriers, so no other thread runs during a
// read-modify-write; the builtins make it an atomic one to the race check
// (--config=cuda_emulation_racecheck) too. Relaxed, as CUDA's atomics.
template <typename T>
T atomicAdd(T* address, T value) {
  if constexpr (std::is_integral<T>::value) {
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
  } else {
    T old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    T sum = old + value;
    // Fails only if another thread wrote in between, which none can.
    __atomic_compare_exchange(address, &old, &sum, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
    return old;
  }
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange(address, &compare, &value, false, __ATOMIC_RELAXED,
                            __ATOMIC_RELAXED);
  return compare;
}
template <typename T>
T atomicOr(T* address, T value) {
  return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}

// --- Host functions.

const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);

cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMallocHost(void** pointer, size_t bytes);
cudaError_t cudaFreeHost(void* pointer);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                       cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* pointer, int value, size_t bytes);
// Declared for Eigen's GPU device, which the kernels do not use: not defined.
cudaError_t cudaMemset2DAsync(void* pointer, size_t pitch, int value,
                              size_t width, size_t height,
                              cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes,
                            cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags = 0);
cudaError_t cudaStreamAddCallback(cudaStream_t stream,
                                  cudaStreamCallback_t callback, void* data,
                                  unsigned int flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                               void* data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// CUDA's typed launch: `args` points at one value of each parameter's type.
template <typename... Params>
cudaError_t cudaLaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                             void** args, size_t = 0,
                             cudaStream_t stream = nullptr) {
  struct Closure {
    void (*kernel)(Params...);
    void** args;
  } closure{kernel, args};
  return tfco_emulation::Launch(
      grid, block, stream,
      [](void* p) {
        const Closure* c = static_cast<const Closure*>(p);
        tfco_emulation::CallKernel(c->kernel, c->args,
                                   std::index_sequence_for<Params...>());
      },
      &closure, __PRETTY_FUNCTION__);
}

// Every kernel fits twice on a multiprocessor here.
template <typename Kernel>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, Kernel,
                                                          int, size_t) {
  *blocks = 2;
  return cudaSuccess;
}

#endif  // TOOLS_GPU_CHECK_EMULATION_INCLUDE_CUDA_RUNTIME_H_
