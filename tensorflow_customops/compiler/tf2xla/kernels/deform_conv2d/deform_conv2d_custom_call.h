// DeformableConv2d's custom-call lowerings (custom_call.h): the op and its
// gradient op each become one call into the portable kernels' entry point that
// the regular kernel runs. There is nothing to check in the data (every
// offset and mask value has a defined result), so the calls raise nothing
// the regular kernels would.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_DEFORM_CONV2D_DEFORM_CONV2D_CUSTOM_CALL_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_DEFORM_CONV2D_DEFORM_CONV2D_CUSTOM_CALL_H_

#include <array>
#include <cstdint>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/custom_call.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

class DeformConvCustomCall {
 public:
  explicit DeformConvCustomCall(OpKernelConstruction* context);

  // Sets the outputs of the op (of the gradient op, with `grad`) to a custom
  // call of the checked call `args`, whose output has `output_dims` (in its
  // data format); false, having set nothing, where the release, the device
  // or the shapes leave it to the HLO lowering.
  bool Compile(XlaOpKernelContext* context, bool grad,
               const TfcoDeformConv2dArgs& args,
               const std::array<int64_t, 4>& output_dims) const;

#if TFCO_XLA_CUSTOM_CALLS
 private:
  CustomCallChoice choice_;
#endif
};

}  // namespace deform_conv2d
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_DEFORM_CONV2D_DEFORM_CONV2D_CUSTOM_CALL_H_
