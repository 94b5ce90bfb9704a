// The OpKernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients and box gradients), which run the portable kernels'
// TfcoRoiAlign, TfcoRoiAlignGrad and TfcoRoiAlignGradBoxes
// (roi_align_op_entry.cc) through roi_glue.h.

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow_customops/core/kernels/roi/roi_glue.h"

namespace tensorflow {
namespace customops {

#define REGISTER_BOX_GRAD(device, on_gpu, op, kind, T)                         \
  TFCO_REGISTER_KERNEL_BUILDER(                                                \
      Name("CustomOps>" op "GradBoxes").Device(device).TypeConstraint<T>("T"), \
      roi::RoiOp<on_gpu, kind, roi::PrepareBoxGradient>)
#define REGISTER(device, on_gpu, T)                                          \
  TFCO_REGISTER_ROI_KERNELS(device, on_gpu, "RoiAlign", RoiKind::kAlign, T); \
  TFCO_REGISTER_ROI_KERNELS(device, on_gpu, "PsRoiAlign", RoiKind::kPsAlign, \
                            T);                                              \
  REGISTER_BOX_GRAD(device, on_gpu, "RoiAlign", roi::RoiKind::kAlign, T);    \
  REGISTER_BOX_GRAD(device, on_gpu, "PsRoiAlign", roi::RoiKind::kPsAlign, T);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, false, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA
#define REGISTER_GPU(T) REGISTER(DEVICE_GPU, true, T)
TF_CALL_FLOAT_TYPES(REGISTER_GPU);
#undef REGISTER_GPU
#endif  // GOOGLE_CUDA
#undef REGISTER
#undef REGISTER_BOX_GRAD

}  // namespace customops
}  // namespace tensorflow
