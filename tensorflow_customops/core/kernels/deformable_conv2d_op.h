// CustomOps>DeformableConv2d and its gradient op in the kernel core: their
// entry points, for the OpKernels (deformable_conv2d_op.cc), and, for the
// core's own sources, their functors.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORMABLE_CONV2D_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORMABLE_CONV2D_OP_H_

#include "tensorflow_customops/core/kernels/core_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The validated geometry of one call (deformable_conv2d_shape.h): input
 * [n, h, w, c] (NCHW when nchw), filter HWIO [kh, kw, c / groups, o], offset
 * [n, ho, wo, 2 * offset_groups * kh * kw], mask [n, ho, wo, offset_groups *
 * kh * kw] when use_mask, output [n, ho, wo, o]; offset, mask and output are
 * NCHW too when nchw. Every size is non-negative, c >= 1, kh, kw >= 1,
 * strides and dilations >= 1, groups and offset_groups divide c, groups
 * divides o, and every tensor's element count fits int64. */
typedef struct TfcoDeformConv2dArgs {
  int64_t n, h, w, c, kh, kw, o, ho, wo;
  int64_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
  int64_t groups, offset_groups;
  int nchw, use_mask;
} TfcoDeformConv2dArgs;

/* output = the deformable convolution of input with filter; mask is ignored
 * (may be NULL) unless use_mask. */
TFCO_CORE_API TfcoError TfcoDeformableConv2d(
    const TfcoDevice* device, TfcoDtype dtype, const TfcoDeformConv2dArgs* args,
    const void* input, const void* filter, const void* offset,
    const void* mask, void* output);

/* The gradients of output with respect to input, filter, offset and mask
 * (written only when use_mask), given grad_output. */
TFCO_CORE_API TfcoError TfcoDeformableConv2dGrad(
    const TfcoDevice* device, TfcoDtype dtype, const TfcoDeformConv2dArgs* args,
    const void* input, const void* filter, const void* offset,
    const void* mask, const void* grad_output, void* grad_input,
    void* grad_filter, void* grad_offset, void* grad_mask);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef TFCO_KERNEL_CORE
#include <type_traits>

#include "tensorflow_customops/core/kernels/core_device.h"

namespace tensorflow {
namespace customops {
namespace functor {

// The type DeformableConv2d computes in: double for double, else float.
template <typename T>
using DeformConvAccumulator =
    typename std::conditional<std::is_same<T, double>::value, double,
                              float>::type;

// The forward and backward passes on Device for element type T, over the
// pointers and geometry of the entry points above.
template <typename Device, typename T>
struct DeformableConv2d {
  void operator()(const Device& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, T* output);
};

template <typename Device, typename T>
struct DeformableConv2dGrad {
  void operator()(const Device& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, const T* grad_output, T* grad_input,
                  T* grad_filter, T* grad_offset, T* grad_mask);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_KERNEL_CORE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORMABLE_CONV2D_OP_H_
