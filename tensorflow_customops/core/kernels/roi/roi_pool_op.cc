// The OpKernels of CustomOps>RoiPool and CustomOps>PsRoiPool (and their
// gradients), which run the portable kernels' TfcoRoiPool and TfcoRoiPoolGrad
// (roi_pool_op_entry.cc) through roi_glue.h.

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow_customops/core/kernels/roi/roi_glue.h"

namespace tensorflow {
namespace customops {

#define REGISTER(device, on_gpu, T)                                        \
  TFCO_REGISTER_ROI_KERNELS(device, on_gpu, "RoiPool", RoiKind::kPool, T); \
  TFCO_REGISTER_ROI_KERNELS(device, on_gpu, "PsRoiPool", RoiKind::kPsPool, T);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, false, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA
#define REGISTER_GPU(T) REGISTER(DEVICE_GPU, true, T)
TF_CALL_FLOAT_TYPES(REGISTER_GPU);
#undef REGISTER_GPU
#endif  // GOOGLE_CUDA
#undef REGISTER

}  // namespace customops
}  // namespace tensorflow
