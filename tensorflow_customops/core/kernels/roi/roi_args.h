// What the RoI OpKernels and XLA lowerings check beyond the rules of
// roi_shape.h (which it includes): the shapes they allocate, built from
// those rules, and the values of the inputs (batch indices, coordinates,
// argmax), which the regular kernels and the XLA custom calls check on the
// host before a kernel touches memory.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ARGS_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ARGS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"
#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

namespace tensorflow {
namespace customops {
namespace roi {

// The pooled output shape (PooledDims) of a call whose sizes are known.
Status PooledShape(const RoiShape& shape, const RoiAttrs& attrs,
                   TensorShape* out);

// The feature shape a gradient op's features_shape input (of shape
// `input_shape`, holding `values`) describes, checked by
// CheckFeaturesShapeInput and CheckFeaturesShapeValues.
Status FeaturesShapeFromValues(const TensorShape& input_shape,
                               absl::Span<const int64_t> values,
                               TensorShape* out);

// Checks the values of `num_rois` boxes ([num_rois, 5], B float or double):
// every coordinate finite and, once scaled by spatial_scale, within
// kMaxScaledCoordinate; every batch index an integer in [0, batch).
template <typename B>
Status CheckRoiValues(const B* rois, int64_t num_rois, int64_t batch,
                      float spatial_scale);

// Whether every argmax value in [begin, end) is -1 or a pixel index in
// [0, area): the pixels RoiPoolGrad writes. Branch-free, so it vectorises.
bool ArgmaxInRange(const int32_t* values, int64_t begin, int64_t end,
                   int64_t area);

// The InvalidArgument naming the first argmax value out of range, or OK.
Status ArgmaxError(const int32_t* values, int64_t size, int64_t area);

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_ARGS_H_
