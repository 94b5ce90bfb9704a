// The C++ side of the portable kernels (portable/api.h), for its sources only
// (compiled with TFCO_PORTABLE defined): the devices its functors run on,
// the Eigen maps they take, and RunKernel, which every exported function goes
// through. Nothing here includes TensorFlow.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_DEVICE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_DEVICE_H_

#ifndef TFCO_PORTABLE
#error "portable/device.h is for the portable kernels' sources (TFCO_PORTABLE)"
#endif

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif

#include <cstdint>
#include <functional>
#include <new>
#include <string>
#include <type_traits>

#include "tensorflow_customops/core/kernels/portable/api.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace tensorflow {
namespace customops {

// Eigen maps over tensor buffers, as TensorFlow's TTypes defines them (row
// major, aligned as TensorFlow aligns its buffers).
template <typename T, int NDIMS = 1>
struct TTypes {
  typedef Eigen::TensorMap<
      Eigen::Tensor<T, NDIMS, Eigen::RowMajor, Eigen::DenseIndex>,
      Eigen::Aligned>
      Tensor;
  typedef Eigen::TensorMap<
      Eigen::Tensor<T, 1, Eigen::RowMajor, Eigen::DenseIndex>, Eigen::Aligned>
      Flat;
  typedef Eigen::TensorMap<
      Eigen::Tensor<const T, 1, Eigen::RowMajor, Eigen::DenseIndex>,
      Eigen::Aligned>
      ConstFlat;
  typedef Eigen::TensorMap<
      Eigen::Tensor<T, 2, Eigen::RowMajor, Eigen::DenseIndex>, Eigen::Aligned>
      Matrix;
  typedef Eigen::TensorMap<
      Eigen::Tensor<const T, 2, Eigen::RowMajor, Eigen::DenseIndex>,
      Eigen::Aligned>
      ConstMatrix;
  typedef Eigen::TensorMap<
      Eigen::TensorFixedSize<T, Eigen::Sizes<>, Eigen::RowMajor,
                             Eigen::DenseIndex>,
      Eigen::Aligned>
      Scalar;
  typedef Eigen::TensorMap<
      Eigen::TensorFixedSize<const T, Eigen::Sizes<>, Eigen::RowMajor,
                             Eigen::DenseIndex>,
      Eigen::Aligned>
      ConstScalar;
};

// CPU functors run on Eigen's ThreadPoolDevice over the caller's pool
// (tensor expressions take it as one), with a parallelFor of its own that
// never waits for work that has not started. Eigen's waits for every block
// it scheduled, which deadlocks when the caller is one of the pool's threads
// and the others wait likewise: XLA runs independent custom calls at once on
// TensorFlow's intra-op pool. Here the calling thread runs the first block and
// then takes blocks as the pool's threads do, and waits only for blocks
// already running. Blocks are sized by Eigen's cost model.
class CPUDevice : public Eigen::ThreadPoolDevice {
 public:
  using Eigen::ThreadPoolDevice::ThreadPoolDevice;

  void parallelFor(Eigen::Index n, const Eigen::TensorOpCost& cost,
                   std::function<void(Eigen::Index, Eigen::Index)> f) const;

  // Tensor expressions and contractions (`.device(d.eigen())`) pick their
  // threaded evaluators by Eigen's own device type.
  const Eigen::ThreadPoolDevice& eigen() const { return *this; }
};

// Eigen's pool interface over a TfcoThreadPool.
class CallerThreadPool : public Eigen::ThreadPoolInterface {
 public:
  explicit CallerThreadPool(const TfcoThreadPool& pool) : pool_(pool) {}
  void Schedule(std::function<void()> fn) override;
  int NumThreads() const override { return pool_.pool_threads; }
  int CurrentThreadId() const override {
    return pool_.current_thread_id(pool_.pool);
  }

 private:
  TfcoThreadPool pool_;
};

// A CUDA stream, and the multiprocessor count of its device, which sizes
// grids. Host-compiled code only passes it on to the GPU functors.
class GPUDevice {
 public:
  // Records an error (RecordError) if the stream's device cannot be queried.
  explicit GPUDevice(void* stream);
  void* raw_stream() const { return stream_; }
  int getNumGpuMultiProcessors() const { return multiprocessors_; }

 private:
  void* stream_;
  int multiprocessors_ = 1;
};

// Device memory operations in stream order (device_gpu.cu.cc, under
// --config=cuda); failures are recorded (RecordError). None waits for the
// stream: CopyToHostAsync's `host` (page-locked) holds the bytes, and
// WhenStreamDone calls fn(arg, error) on `pool`, once the GPU has passed them
// (TfcoWhenStreamDone).
void ZeroGpuMemory(const GPUDevice& d, void* data, size_t bytes);
void CopyToHostAsync(const GPUDevice& d, void* host, const void* gpu,
                     size_t bytes);
void WhenStreamDone(const GPUDevice& d, const TfcoThreadPool& pool,
                    TfcoDoneFn fn, void* arg);

// The first error of the current call into the core on this thread:
// RecordError keeps the first message, CurrentError returns it (null if
// none) and stays valid until ClearError, at the start of the next call.
void RecordError(const std::string& message);
void ClearError();
TfcoError CurrentError();

template <typename T>
struct CoreDtype;
#define TFCO_CORE_DTYPE(T, value)         \
  template <>                             \
  struct CoreDtype<T> {                   \
    static constexpr TfcoDtype v = value; \
  };
TFCO_CORE_DTYPE(Eigen::half, TFCO_HALF)
TFCO_CORE_DTYPE(Eigen::bfloat16, TFCO_BFLOAT16)
TFCO_CORE_DTYPE(float, TFCO_FLOAT)
TFCO_CORE_DTYPE(double, TFCO_DOUBLE)
TFCO_CORE_DTYPE(int8_t, TFCO_INT8)
TFCO_CORE_DTYPE(uint8_t, TFCO_UINT8)
TFCO_CORE_DTYPE(int32_t, TFCO_INT32)
TFCO_CORE_DTYPE(int64_t, TFCO_INT64)
#undef TFCO_CORE_DTYPE

template <typename... T>
struct TypeList {};

// The floating-point element types, as a TypeList and as a macro that
// calls m(T) for each.
typedef TypeList<Eigen::half, Eigen::bfloat16, float, double> FloatTypes;
#define TFCO_CALL_FLOAT_TYPES(m) \
  m(Eigen::half) m(Eigen::bfloat16) m(float) m(double)

// Calls fn(T()) for the T of `dtype` in the list; false if it has none.
template <typename Fn>
bool ForDtype(TypeList<>, TfcoDtype, Fn&) {
  return false;
}
template <typename T, typename... Rest, typename Fn>
bool ForDtype(TypeList<T, Rest...>, TfcoDtype dtype, Fn& fn) {
  if (CoreDtype<T>::v == dtype) {
    fn(T());
    return true;
  }
  return ForDtype(TypeList<Rest...>(), dtype, fn);
}

// Runs fn(d), d the CPUDevice or GPUDevice that `device` names; returns what
// went wrong, named after `op`, or null.
template <typename Fn>
TfcoError RunOnDevice(const char* op, const TfcoDevice* device, Fn&& fn) {
  ClearError();
  try {
    if (device->gpu_stream == nullptr) {
      CallerThreadPool pool(*device->cpu);
      fn(CPUDevice(&pool, device->cpu->num_threads));
    } else {
#if GOOGLE_CUDA
      const GPUDevice d(device->gpu_stream);
      if (CurrentError() == nullptr) fn(d);
#else
      RecordError(std::string(op) +
                  ": this kernel core was built without CUDA kernels");
#endif
    }
  } catch (const std::bad_alloc&) {
    RecordError(std::string(op) + ": out of host memory");
  }
  return CurrentError();
}

// Records that `op` has no kernel for `dtype`.
void NoKernelFor(const char* op, TfcoDtype dtype);

// RunOnDevice of kernel(d, T()) with T the type of `dtype`, among CpuTypes
// or GpuTypes.
template <typename CpuTypes, typename GpuTypes, typename Kernel>
TfcoError RunKernel(const char* op, const TfcoDevice* device, TfcoDtype dtype,
                    Kernel&& kernel) {
  return RunOnDevice(op, device, [&](const auto& d) {
    auto run = [&](auto t) { kernel(d, t); };
    bool found;
    if constexpr (std::is_same<std::decay_t<decltype(d)>, CPUDevice>::value) {
      found = ForDtype(CpuTypes(), dtype, run);
    } else {
      found = ForDtype(GpuTypes(), dtype, run);
    }
    if (!found) NoKernelFor(op, dtype);
  });
}

}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_DEVICE_H_
