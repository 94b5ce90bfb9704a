// CustomOps>RoiBoxCounts in the portable kernels: its entry point, for the
// OpKernel (roi_box_counts_op.cc) and the XLA custom call
// (compiler/tf2xla/kernels/roi_box_counts_op.cc), and the errors both raise,
// written here once so that every path gives the same message.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_BOX_COUNTS_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_BOX_COUNTS_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

// Bits of the flags word TfcoRoiBoxCounts sets.
enum { TFCO_COUNT_NEGATIVE = 1, TFCO_COUNT_ABOVE_K = 2 };

// Sets *flags (host memory) to the TFCO_COUNT_* bits of the `n` counts of
// integer `dtype` (int32 or int64) at `counts`, host memory on every device:
// a count below 0, a count above `boxes_per_image`.
extern "C" TFCO_CORE_API TfcoError
TfcoRoiBoxCounts(const TfcoDevice* device, TfcoDtype dtype, const void* counts,
                 int64_t n, int64_t boxes_per_image, int* flags);

#ifdef __cplusplus
#include <string>

// The error of the shapes: features [F, ...] of rank 4, rois [N, K, 4] of
// rank 3 (only N and K are read) and box_counts [C] of rank 1; F and N must
// agree, and C with N. Empty if they do. Ranks are checked first, so the
// dimensions are only read once they exist.
inline std::string TfcoRoiBoxCountsShapeError(int features_rank, int rois_rank,
                                              int counts_rank,
                                              int64_t feature_images,
                                              int64_t images, int64_t counts) {
  if (features_rank != 4) {
    return "RoiBoxCounts: features must have rank 4, got rank " +
           std::to_string(features_rank);
  }
  if (rois_rank != 3) {
    return "RoiBoxCounts: rois must have shape [N, K, 4], got rank " +
           std::to_string(rois_rank);
  }
  if (counts_rank != 1) {
    return "RoiBoxCounts: box_counts must have shape [N], got rank " +
           std::to_string(counts_rank);
  }
  if (images != feature_images) {
    return "rois holds boxes for " + std::to_string(images) +
           " images but features holds " + std::to_string(feature_images);
  }
  if (counts != images) {
    return "box_counts must hold one count per image of rois (" +
           std::to_string(images) + "), got " + std::to_string(counts);
  }
  return "";
}

// The error of counts whose TfcoRoiBoxCounts flags are `flags`, showing the
// first 20 counts; empty if the flags are clear.
template <typename Count>
std::string TfcoRoiBoxCountsError(int flags, const Count* counts, int64_t n,
                                  int64_t boxes_per_image) {
  if (flags == 0) return "";
  std::string shown = "[";
  constexpr int64_t kShown = 20;
  for (int64_t i = 0; i < n && i < kShown; ++i) {
    if (i > 0) shown += ", ";
    shown += std::to_string(static_cast<int64_t>(counts[i]));
  }
  shown += n > kShown ? ", ...]" : "]";
  if (flags & TFCO_COUNT_NEGATIVE) {
    return "box_counts must not be negative, got " + shown;
  }
  return "box_counts must be at most rois.shape[1] (" +
         std::to_string(boxes_per_image) + "), got " + shown;
}
#endif  // __cplusplus

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_BOX_COUNTS_OP_H_
