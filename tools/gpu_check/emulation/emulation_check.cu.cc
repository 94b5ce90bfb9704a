// The emulation's own checks (emulation_test.py): what a GPU does that the
// library's kernels rely on, and the faults the emulation must report.
//
//   emulation_check CHECK     prints the check's findings; status 3 where
//                             the device is not the emulation
//
// CHECK: barriers, callbacks, config, divergent, trap, overrun, host_read,
// and for the race check: racecheck (prints whether this is its build),
// neighbours, race.

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 256;

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::cout << what << ": " << cudaGetErrorString(status) << "\n";
  }
}

// Block b sums in[b * n, (b + 1) * n) through shared memory, then each warp
// sums its lanes' partial sums by shuffles: out[b] and out[blocks + b].
__global__ void Sums(const float* in, int n, float* out) {
  __shared__ float part[kThreads];
  float s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += in[blockIdx.x * n + i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
    __syncthreads();
  }
  float lane = static_cast<float>(threadIdx.x % 32);
  for (int mask = 16; mask > 0; mask /= 2) {
    lane += __shfl_xor_sync(0xffffffff, lane, mask);
  }
  if (threadIdx.x == 0) {
    out[blockIdx.x] = part[0];
    out[gridDim.x + blockIdx.x] = lane;
  }
}

// Odd threads wait at a block barrier, even ones at their warp's.
__global__ void Divergent(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 2 == 1) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(0xffffffff, v, 1);
  }
  out[threadIdx.x] = v;
}

// Each thread writes its slot of shared memory and reads its neighbour's, a
// race unless a barrier comes between; each also adds one to a shared count
// with an atomic, which is none. out: the neighbours' slots, then the count.
__global__ void Neighbours(int* out, bool barrier) {
  __shared__ int slot[64];
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  slot[threadIdx.x] = static_cast<int>(threadIdx.x);
  atomicAdd(&count, 1);
  if (barrier) __syncthreads();
  out[threadIdx.x] = slot[(threadIdx.x + 1) % 64];
  __syncthreads();
  if (threadIdx.x == 0) out[64] = count;
}

__global__ void Trap() { __trap(); }

// Writes element n of a buffer of n.
__global__ void WritePastEnd(float* data, int n) {
  if (threadIdx.x == 0) data[n] = 1;
}

template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 blocks, dim3 threads,
                   Args... args) {
  void* pointers[] = {static_cast<void*>(&args)...};
  return cudaLaunchKernel(kernel, blocks, threads, pointers, 0, nullptr);
}

void Barriers() {
  const int blocks = 3, n = 1000;
  std::vector<float> in(blocks * n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % n);
  float *d_in, *d_out;
  Check(cudaMalloc(reinterpret_cast<void**>(&d_in), in.size() * 4), "malloc");
  Check(cudaMalloc(reinterpret_cast<void**>(&d_out), 2 * blocks * 4), "malloc");
  Check(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice),
        "copy");
  Check(Launch(Sums, dim3(blocks), dim3(kThreads), d_in, n, d_out), "launch");
  float out[2 * blocks];
  Check(cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost), "copy");
  for (float v : out) std::cout << v << "\n";
}

void Callbacks() {
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "stream");
  static std::atomic<int> calls{0};
  static std::thread::id main_thread = std::this_thread::get_id();
  const auto callback = [](cudaStream_t, cudaError_t status, void*) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::this_thread::get_id() != main_thread && status == cudaSuccess) {
      ++calls;
    }
  };
  Check(cudaStreamAddCallback(stream, callback, nullptr, 0), "callback");
  Check(cudaStreamAddCallback(stream, callback, nullptr, 0), "callback");
  Check(cudaStreamSynchronize(stream), "synchronize");
  std::cout << "calls after synchronize: " << calls << "\n";
}

void Config() {
  int n = 0;
  float* none = nullptr;
  std::cout << cudaGetErrorString(
                   Launch(Sums, dim3(1), dim3(2048), none, n, none))
            << "\n";
  std::cout << cudaGetErrorString(cudaGetLastError()) << "\n";
  std::cout << cudaGetErrorString(cudaGetLastError()) << "\n";
}

void Sticky(void (*kernel)(), const char* what) {
  Check(Launch(kernel, dim3(1), dim3(64)), what);
  std::cout << "synchronize: "
            << cudaGetErrorString(cudaStreamSynchronize(nullptr)) << "\n";
  void* p = nullptr;
  std::cout << "malloc: " << cudaGetErrorString(cudaMalloc(&p, 4)) << "\n";
}

void DivergentCheck() {
  int* out;
  Check(cudaMalloc(reinterpret_cast<void**>(&out), 64 * 4), "malloc");
  Check(Launch(Divergent, dim3(1), dim3(64), out), "launch");
  std::cout << "synchronize: "
            << cudaGetErrorString(cudaStreamSynchronize(nullptr)) << "\n";
}

void NeighboursCheck(bool barrier) {
  int* d_out;
  Check(cudaMalloc(reinterpret_cast<void**>(&d_out), 65 * 4), "malloc");
  Check(Launch(Neighbours, dim3(2), dim3(64), d_out, barrier), "launch");
  int out[65];
  Check(cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost), "copy");
  for (int v : out) std::cout << v << " ";
  std::cout << "\n";
}

void Overrun() {
  const int n = 256;  // 1 KiB: no padding after it
  float* data;
  Check(cudaMalloc(reinterpret_cast<void**>(&data), n * 4), "malloc");
  Check(Launch(WritePastEnd, dim3(1), dim3(32), data, n), "launch");
  std::cout << "not stopped\n";
}

void HostRead() {
  float* data;
  Check(cudaMalloc(reinterpret_cast<void**>(&data), 4), "malloc");
  std::cout << "read " << data[0] << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  if (argc != 2 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      std::strstr(prop.name, "emulated") == nullptr) {
    std::cerr << "emulation_check: not the CPU emulation\n";
    return 3;
  }
  const std::string check = argv[1];
  if (check == "barriers") {
    Barriers();
  } else if (check == "callbacks") {
    Callbacks();
  } else if (check == "config") {
    Config();
  } else if (check == "divergent") {
    DivergentCheck();
  } else if (check == "trap") {
    Sticky(Trap, "launch");
  } else if (check == "overrun") {
    Overrun();
  } else if (check == "host_read") {
    HostRead();
  } else if (check == "racecheck") {
#ifdef __SANITIZE_THREAD__
    std::cout << "yes\n";
#else
    std::cout << "no\n";
#endif
  } else if (check == "neighbours") {
    NeighboursCheck(true);
  } else if (check == "race") {
    NeighboursCheck(false);
  } else {
    std::cerr << "emulation_check: unknown check " << check << "\n";
    return 2;
  }
  return 0;
}
