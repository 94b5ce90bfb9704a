// How an OpKernel (the per-TensorFlow glue) calls the portable kernels
// (portable/api.h): the kernel's device and element type in the core's terms,
// and the core's errors as a Status.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_CALL_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_CALL_H_

#define EIGEN_USE_THREADS
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include <functional>
#include <type_traits>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow_customops/core/kernels/portable/api.h"

namespace tensorflow {
namespace customops {

// Whether a kernel on Device (Eigen::ThreadPoolDevice or Eigen::GpuDevice)
// runs on the GPU.
template <typename Device>
constexpr bool OnGpu() {
  return !std::is_same<Device, Eigen::ThreadPoolDevice>::value;
}

// The core's device for a kernel: TensorFlow's intra-op thread pool, and on
// GPU the kernel's CUDA stream. Lives as long as the calls into the core.
class CoreDevice {
 public:
  CoreDevice(OpKernelContext* context, bool on_gpu);
  CoreDevice(const CoreDevice&) = delete;
  CoreDevice& operator=(const CoreDevice&) = delete;

  const TfcoDevice* get() const { return &device_; }

 private:
  TfcoThreadPool pool_;
  TfcoDevice device_;
};

// How a GPU kernel (an AsyncOpKernel) reads results on the host without
// blocking: once the GPU has finished the work enqueued so far on the
// kernel's stream, `then` runs on TensorFlow's CPU pool with the stream's
// status (an Internal error if it failed). Then, and only then, buffers that
// the work reads or writes may be released, and the kernel's `done` called.
// If the core cannot enqueue that, `then` runs at once with the error.
void WhenGpuDone(OpKernelContext* context, std::function<void(Status)> then);

// The core's name of a TensorFlow element type the kernels take.
TfcoDtype CoreDtype(DataType dtype);
template <typename T>
TfcoDtype CoreDtype() {
  return CoreDtype(DataTypeToEnum<T>::value);
}

// OK for null, else an Internal error with the core's message.
Status CoreStatus(TfcoError error);

}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_CALL_H_
