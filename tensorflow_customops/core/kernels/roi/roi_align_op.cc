// The OpKernels of CustomOps>RoiAlign and CustomOps>PsRoiAlign (and their
// gradients), which run the portable kernels' TfcoRoiAlign and TfcoRoiAlignGrad
// (roi_align_op_entry.cc).

#include "tensorflow_customops/core/kernels/roi/roi_align_op.h"

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
struct AlignLaunch {
  static TfcoError Forward(const TfcoDevice* device, TfcoDtype dtype,
                           TfcoDtype boxes_dtype, const roi::RoiArgs* args,
                           const void* features, const void* rois, void* pooled,
                           int32_t* /*argmax*/) {
    return TfcoRoiAlign(device, dtype, boxes_dtype, args, features, rois,
                        pooled);
  }
  static TfcoError Backward(const TfcoDevice* device, TfcoDtype dtype,
                            TfcoDtype boxes_dtype, const roi::RoiArgs* args,
                            const void* grads, const void* rois,
                            const int32_t* /*argmax*/, void* grad_features) {
    return TfcoRoiAlignGrad(device, dtype, boxes_dtype, args, grads, rois,
                            grad_features);
  }
};

// RoiAlignGradBoxes and PsRoiAlignGradBoxes: the box gradient.
template <typename Device, typename T, roi::RoiKind kKind>
class RoiAlignGradBoxesOp : public roi::RoiOpKernel<kKind> {
 public:
  using roi::RoiOpKernel<kKind>::RoiOpKernel;

  void Compute(OpKernelContext* context) override {
    constexpr roi::RoiKernelOptions options = roi::OptionsFor<Device, T>();
    roi::RoiCall call;
    OP_REQUIRES_OK(context,
                   PrepareBoxGradient(context, this->attrs_, options, &call));
    if (call.empty) return;
    const CoreDevice device(context, options.on_gpu);
    OP_REQUIRES_OK(
        context,
        CoreStatus(TfcoRoiAlignGradBoxes(
            device.get(), CoreDtype<T>(), this->boxes_dtype_, &call.args,
            context->input(0).data(), context->input(1).data(), call.rois,
            call.outputs[0]->data())));
  }
};

}  // namespace

// rois live in host memory, as for the other RoI kernels: they are validated
// there before anything is launched.
#define REGISTER_BOX_GRAD(device, DeviceType, op, kind, T)       \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>" op "GradBoxes") \
                                   .Device(device)               \
                                   .TypeConstraint<T>("T")       \
                                   .HostMemory("rois"),          \
                               RoiAlignGradBoxesOp<DeviceType, T, kind>)
#define REGISTER(device, DeviceType, T)                                       \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "RoiAlign", RoiKind::kAlign,  \
                            AlignLaunch, T);                                  \
  TFCO_REGISTER_ROI_KERNELS(device, DeviceType, "PsRoiAlign",                 \
                            RoiKind::kPsAlign, AlignLaunch, T);               \
  REGISTER_BOX_GRAD(device, DeviceType, "RoiAlign", roi::RoiKind::kAlign, T); \
  REGISTER_BOX_GRAD(device, DeviceType, "PsRoiAlign", roi::RoiKind::kPsAlign, \
                    T);
#define REGISTER_CPU(T) REGISTER(DEVICE_CPU, CPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA
#define REGISTER_GPU(T) REGISTER(DEVICE_GPU, GPUDevice, T)
TF_CALL_FLOAT_TYPES(REGISTER_GPU);
#undef REGISTER_GPU
#endif  // GOOGLE_CUDA
#undef REGISTER
#undef REGISTER_BOX_GRAD

}  // namespace customops
}  // namespace tensorflow
