#include "tensorflow_customops/core/kernels/roi/roi_args.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace customops {
namespace roi {

Status PooledShape(const RoiShape& shape, const RoiAttrs& attrs,
                   TensorShape* out) {
  const std::array<int64_t, 4> dims = PooledDims(shape, attrs);
  TF_RETURN_IF_ERROR(CheckNumElements(dims, "pooled output"));
  return TensorShape::BuildTensorShape(dims, out);
}

Status FeaturesShapeFromValues(const TensorShape& input_shape,
                               absl::Span<const int64_t> values,
                               TensorShape* out) {
  TF_RETURN_IF_ERROR(CheckFeaturesShapeInput(input_shape));
  TF_RETURN_IF_ERROR(CheckFeaturesShapeValues(values));
  return TensorShape::BuildTensorShape(values, out);
}

template <typename B>
Status CheckRoiValues(const B* rois, int64_t num_rois, int64_t batch,
                      float spatial_scale) {
  for (int64_t k = 0; k < num_rois; ++k) {
    const B* roi = rois + k * 5;
    if (RoiOk(roi, batch, spatial_scale)) continue;
    for (int i = 0; i < 5; ++i) {
      if (!std::isfinite(roi[i])) {
        return errors::InvalidArgument("rois[", k, ", ", i,
                                       "] is not finite: ", roi[i]);
      }
    }
    // Beyond the bound, box extents overflow float (NaN sample positions) and
    // rounded or sampled positions overflow the integer types they are
    // converted to, which is undefined behaviour.
    for (int i = 1; i < 5; ++i) {
      const double scaled = static_cast<double>(roi[i]) * spatial_scale;
      if (std::abs(scaled) > kMaxScaledCoordinate) {
        return errors::InvalidArgument(
            "rois[", k, ", ", i, "] * spatial_scale = ", scaled,
            " is outside [-2^30, 2^30], far off any feature map (check the "
            "coordinates and spatial_scale)");
      }
    }
    const B index = roi[0];
    if (index != std::floor(index) || index < 0 ||
        index >= static_cast<B>(batch)) {
      return errors::InvalidArgument(
          "rois[", k, ", 0] (batch index) must be an integer in [0, ", batch,
          "), got ", index);
    }
    return errors::Internal("rois[", k, "] fails RoiOk, but no check says why");
  }
  return OkStatus();
}
template Status CheckRoiValues(const float*, int64_t, int64_t, float);
template Status CheckRoiValues(const double*, int64_t, int64_t, float);

bool ArgmaxInRange(const int32_t* values, int64_t begin, int64_t end,
                   int64_t area) {
  // Valid values v are -1 .. area - 1, so v + 1 (unsigned) is at most area.
  const uint32_t limit = static_cast<uint32_t>(area);
  bool bad = false;
  for (int64_t i = begin; i < end; ++i) {
    bad |= static_cast<uint32_t>(values[i]) + 1u > limit;
  }
  return !bad;
}

Status ArgmaxError(const int32_t* values, int64_t size, int64_t area) {
  const uint32_t limit = static_cast<uint32_t>(area);
  for (int64_t i = 0; i < size; ++i) {
    if (static_cast<uint32_t>(values[i]) + 1u > limit) {
      return errors::InvalidArgument("argmax[", i, "] = ", values[i],
                                     " is not -1 or a pixel index in [0, ",
                                     area, ")");
    }
  }
  return OkStatus();
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
