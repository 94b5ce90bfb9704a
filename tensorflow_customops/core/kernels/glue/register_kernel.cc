#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

#include "tensorflow/core/framework/kernel_def.pb.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/logging.h"
#include "tensorflow_customops/core/kernels/portable/gpu_support.h"

namespace tensorflow {
namespace customops {

namespace {

// Logs once why the GPU kernels are left out: a warning where a driver
// exists (a GPU user loses speed), information where there is none (a
// CPU-only machine running the CUDA build loses nothing).
void LogGpuKernelsLeftOut(const TfcoGpuSupport& support) {
  static const bool logged = [&support] {
    const char* what =
        "tensorflow_customops: no GPU kernels are registered, so TensorFlow "
        "runs the library's ops on the CPU: ";
    if (support.driver_version > 0) {
      LOG(WARNING) << what << support.reason;
    } else {
      LOG(INFO) << what << support.reason;
    }
    return true;
  }();
  (void)logged;
}

}  // namespace

bool RegisterKernel(const KernelDef* kernel_def, const char* class_name,
                    OpKernel* (*create)(OpKernelConstruction*)) {
  if (kernel_def->device_type() == DEVICE_GPU) {
    const TfcoGpuSupport* support = TfcoGetGpuSupport();
    if (!support->usable) {
      if (support->compiled) LogGpuKernelsLeftOut(*support);
      delete kernel_def;
      return false;
    }
  }
  kernel_factory::OpKernelRegistrar registrar(kernel_def, class_name, create);
  return true;
}

}  // namespace customops
}  // namespace tensorflow
