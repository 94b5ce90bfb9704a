// The RoI ops' custom-call lowerings (custom_call.h): each RoI op and
// gradient op becomes one call into the portable kernels' entry point that its
// regular kernel runs. On the host (roi_custom_call_host.cc) the boxes (and
// argmax) get the regular kernels' checks, which raise their errors; on CUDA
// (typed FFI, roi_custom_call_gpu.cc) a box that fails them gives zeros, as
// in the HLO lowering. What the two share: roi_custom_call_handlers.h.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_CUSTOM_CALL_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_CUSTOM_CALL_H_

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/custom_call.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Which op of a RoI kind: the forward op, its feature gradient (RoiAlignGrad,
// ...) or its box gradient (RoiAlignGradBoxes, ...).
enum class RoiOpRole { kForward, kGrad, kGradBoxes };

class RoiCustomCall {
 public:
  explicit RoiCustomCall(OpKernelConstruction* context);

  // Sets the outputs of `role`'s op of `attrs.kind`, whose shapes the caller
  // checked (`shape`), to a custom call; false, having set nothing, where the
  // release, the device or the shapes leave it to the HLO lowering.
  bool Compile(XlaOpKernelContext* context, RoiOpRole role,
               const RoiAttrs& attrs, const RoiShape& shape) const;

#if TFCO_XLA_CUSTOM_CALLS
 private:
  CustomCallChoice choice_;
#endif
};

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_CUSTOM_CALL_H_
