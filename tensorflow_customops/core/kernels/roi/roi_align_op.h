// CustomOps>RoiAlign and CustomOps>PsRoiAlign, and their gradients, in the
// portable kernels: the entry points, for the OpKernels (roi_align_op.cc), and,
// for the core's own sources, the functors (their sampling grid is in
// roi_sampling.h).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

// pooled = RoiAlign(features, rois), or PsRoiAlign as args->attrs.kind says,
// for a floating-point `dtype`. `args` is validated, the pooled tensor is not
// empty, and `rois` ([K, 5], validated) is in the device's memory. The boxes'
// type `boxes_dtype` is TFCO_FLOAT, or TFCO_DOUBLE with double features
// (roi::BoxTypesOk); the box geometry is computed in the wider of the two.
// `argmax` is unused (null): the signature is TfcoRoiPool's, so that callers
// pick either entry point by the kind.
extern "C" TFCO_CORE_API TfcoError TfcoRoiAlign(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* features,
    const void* rois, void* pooled, int32_t* argmax);

// grad_features = d(pooled)/d(features)^T grads of the same kernel; the
// feature gradient is not empty, and is fully written. `argmax` is unused
// (null), as TfcoRoiAlign's.
extern "C" TFCO_CORE_API TfcoError TfcoRoiAlignGrad(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* grads,
    const void* rois, const int32_t* argmax, void* grad_features);

// grad_rois = d(pooled)/d(rois)^T grads of the same kernel at its sampling
// grid (the grid does not move with the box), as CropAndResize's box
// gradient: [K, 5] in the boxes' type, column 0 (the batch index) zero.
// `features` is the forward's input; grad_rois is in host memory on CPU,
// device memory on GPU.
extern "C" TFCO_CORE_API TfcoError TfcoRoiAlignGradBoxes(
    const TfcoDevice* device, TfcoDtype dtype, TfcoDtype boxes_dtype,
    const tensorflow::customops::roi::RoiArgs* args, const void* grads,
    const void* features, const void* rois, void* grad_rois);

// checked = rois ([num_rois, 5], device memory) with every box that fails
// roi::RoiOk replaced by roi::NullBox, enqueued on the GPU stream: what the
// GPU kernels compute on, so that no box reaches them unchecked; the XLA GPU
// lowering, which cannot raise on data, returns their results, and the
// OpKernels raise once the host has checked its copy of the boxes. Serves
// every RoI kind, boxes of `boxes_dtype` (float or double). GPU only.
extern "C" TFCO_CORE_API TfcoError TfcoRoiCheckBoxes(
    const TfcoDevice* device, TfcoDtype boxes_dtype, int64_t num_rois,
    int64_t batch, float spatial_scale, const void* rois, void* checked);

#ifdef TFCO_PORTABLE
#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace functor {

// pooled = RoiAlign(features, rois), or PsRoiAlign as args.attrs.kind says.
// `rois` is validated [K, 5] in the device's memory, of type B (float, or
// double with double T). Shared by the CPU kernel (roi_align_op_cpu.cc) and
// the GPU kernel (roi_align_op_gpu.cu.cc).
template <typename Device, typename T, typename B>
struct RoiAlign {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* features,
                  const B* rois, T* pooled);
};

// grad_features = d(pooled)/d(features)^T grads; grad_features is fully
// written (zeroed first).
template <typename Device, typename T, typename B>
struct RoiAlignGrad {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const B* rois, T* grad_features);
};

// grad_rois = d(pooled)/d(rois)^T grads (TfcoRoiAlignGradBoxes); every
// element is written.
template <typename Device, typename T, typename B>
struct RoiAlignGradBoxes {
  void operator()(const Device& d, const roi::RoiArgs& args, const T* grads,
                  const T* features, const B* rois, B* grad_rois);
};

// TfcoRoiCheckBoxes on the GPU (roi_align_op_gpu.cu.cc).
template <typename B>
void CheckBoxesGpu(const GPUDevice& d, int64_t num_rois, int64_t batch,
                   float spatial_scale, const B* rois, B* checked);

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ALIGN_OP_H_
