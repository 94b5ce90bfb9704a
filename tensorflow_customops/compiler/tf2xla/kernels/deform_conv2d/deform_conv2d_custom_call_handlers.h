// What DeformableConv2d's custom calls share between their lowering
// (deform_conv2d_custom_call.cc) and their handlers on the host and on CUDA
// (deform_conv2d_custom_call_handlers.cc, which registers them): the targets
// and the layout of the attributes. No TensorFlow header (ffi_handler.h):
// the CUDA handlers link into tools/gpu_check.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_DEFORM_CONV2D_DEFORM_CONV2D_CUSTOM_CALL_HANDLERS_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_DEFORM_CONV2D_DEFORM_CONV2D_CUSTOM_CALL_HANDLERS_H_

#include <cstdint>
#include <vector>

#include "tensorflow_customops/compiler/tf2xla/ffi_handler.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

// Custom-call targets of the op and of its gradient op.
inline constexpr char kForward[] = "tfco_deformable_conv2d";
inline constexpr char kGrad[] = "tfco_deformable_conv2d_grad";

// The core's arguments as the handlers' `ints` attribute, in field order.
std::vector<int64_t> Ints(const TfcoDeformConv2dArgs& a);

}  // namespace deform_conv2d
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_DEFORM_CONV2D_DEFORM_CONV2D_CUSTOM_CALL_HANDLERS_H_
