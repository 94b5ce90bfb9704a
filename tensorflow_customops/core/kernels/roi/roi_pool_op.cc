// The OpKernels of CustomOps>RoiPool and CustomOps>PsRoiPool (and their
// gradients), which run the portable kernels' TfcoRoiPool and TfcoRoiPoolGrad
// (roi_pool_op_entry.cc).

#include "tensorflow_customops/core/kernels/roi/roi_pool_op.h"

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow_customops/core/kernels/roi/roi_glue.h"

namespace tensorflow {
namespace customops {

typedef Eigen::ThreadPoolDevice CPUDevice;
typedef Eigen::GpuDevice GPUDevice;

namespace {

// The launcher of RoiForwardOp and RoiBackwardOp: both kinds share the
// entry points, which read the kind from the args.
struct PoolLaunch {
  static TfcoError Forward(const TfcoDevice* device, TfcoDtype dtype,
                           TfcoDtype boxes_dtype, const roi::RoiArgs* args,
                           const void* features, const void* rois, void* pooled,
                           int32_t* argmax) {
    return TfcoRoiPool(device, dtype, boxes_dtype, args, features, rois, pooled,
                       argmax);
  }
  static TfcoError Backward(const TfcoDevice* device, TfcoDtype dtype,
                            TfcoDtype boxes_dtype, const roi::RoiArgs* args,
                            const void* grads, const void* rois,
                            const int32_t* argmax, void* grad_features) {
    return TfcoRoiPoolGrad(device, dtype, boxes_dtype, args, grads, rois,
                           argmax, grad_features);
  }
};

}  // namespace

#define REGISTER(device, DeviceType, T)                                        \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "RoiPool", RoiKind::kPool,     \
                            PoolLaunch, T);                                    \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "PsRoiPool", RoiKind::kPsPool, \
                            PoolLaunch, T);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, CPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA
#define REGISTER_GPU(T) REGISTER(DEVICE_GPU, GPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_GPU);
#undef REGISTER_GPU
#endif  // GOOGLE_CUDA
#undef REGISTER

}  // namespace customops
}  // namespace tensorflow
