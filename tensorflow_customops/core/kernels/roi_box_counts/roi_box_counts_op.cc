// The OpKernels of CustomOps>RoiBoxCounts, which check per-image box counts
// with the portable kernels' TfcoRoiBoxCounts (roi_box_counts_op_entry.cc) and
// pass them through.

#include "tensorflow_customops/core/kernels/roi_box_counts/roi_box_counts_op.h"

#include <string>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow_customops/core/kernels/glue/portable_call.h"
#include "tensorflow_customops/core/kernels/glue/register_kernel.h"

namespace tensorflow {
namespace customops {

template <typename Count>
class RoiBoxCountsOp : public OpKernel {
 public:
  explicit RoiBoxCountsOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    // features and rois are read for their shapes only.
    const TensorShape& features = context->input(0).shape();
    const TensorShape& rois = context->input(1).shape();
    const Tensor& counts = context->input(2);
    const std::string shape_error = TfcoRoiBoxCountsShapeError(
        features.dims(), rois.dims(), counts.dims(),
        features.dims() > 0 ? features.dim_size(0) : 0,
        rois.dims() > 1 ? rois.dim_size(0) : 0,
        counts.dims() > 0 ? counts.dim_size(0) : 0);
    OP_REQUIRES(context, shape_error.empty(),
                errors::InvalidArgument(shape_error));
    const int64_t n = counts.NumElements();
    const int64_t boxes_per_image = rois.dim_size(1);
    int flags = 0;
    // The counts are in host memory on every device.
    const CoreDevice device(context, /*on_gpu=*/false);
    OP_REQUIRES_OK(context, CoreStatus(TfcoRoiBoxCounts(
                                device.get(), CoreDtype<Count>(), counts.data(),
                                n, boxes_per_image, &flags)));
    const std::string error = TfcoRoiBoxCountsError(
        flags, counts.flat<Count>().data(), n, boxes_per_image);
    OP_REQUIRES(context, error.empty(), errors::InvalidArgument(error));
    context->set_output(0, counts);
  }
};

#define REGISTER_CPU(Count)                                           \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiBoxCounts")         \
                                   .Device(DEVICE_CPU)                \
                                   .TypeConstraint<Count>("Tcounts"), \
                               RoiBoxCountsOp<Count>);
TF_CALL_int32(REGISTER_CPU);
TF_CALL_int64(REGISTER_CPU);
#undef REGISTER_CPU

#if GOOGLE_CUDA

// The counts are few and usually come from the host, so on GPU they stay in
// host memory and the CPU code checks them; features and rois stay on the
// device, untouched (only their shapes are read).
#define REGISTER_GPU(Count)                                           \
  TFCO_REGISTER_KERNEL_BUILDER(Name("CustomOps>RoiBoxCounts")         \
                                   .Device(DEVICE_GPU)                \
                                   .HostMemory("box_counts")          \
                                   .HostMemory("checked_counts")      \
                                   .TypeConstraint<Count>("Tcounts"), \
                               RoiBoxCountsOp<Count>);
TF_CALL_int32(REGISTER_GPU);
TF_CALL_int64(REGISTER_GPU);
#undef REGISTER_GPU

#endif  // GOOGLE_CUDA

}  // namespace customops
}  // namespace tensorflow
