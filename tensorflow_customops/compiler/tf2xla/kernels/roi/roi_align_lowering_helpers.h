// This header exposes the bilinear kinds' sampling in HLO (RoiAlign,
// PsRoiAlign) to their lowerings: the forward ops and feature gradients
// (roi_align_ops.cc) and the box gradients (roi_box_grad_ops.cc). It builds on
// roi_lowering_helpers.h and repeats the regular kernels' geometry
// (roi_geometry.h's AlignBox and BilinearSample, roi_sampling.h's
// SampleRange).

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_ALIGN_LOWERING_HELPERS_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_ALIGN_LOWERING_HELPERS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_lowering_helpers.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace hlo {

// Per-box geometry of MakeAlignBox, in the accumulation type, and each
// bin's samples that can land on the map (SampleRange, with a margin of its
// own: both ranges hold every sample on the map, and the others are masked).
struct AlignBoxes {
  xla::XlaOp start_h, start_w, bin_h, bin_w;  // [K], acc
  xla::XlaOp grid_h, grid_w;                  // [K], int32
  xla::XlaOp count;                           // [K], acc: SampleCount
  xla::XlaOp ok, batch;
  xla::XlaOp floored_h, floored_w;  // [K], pred: AlignBox's
  xla::XlaOp first_h, steps_h;      // [K, PH], int32: rows' sample ranges
  xla::XlaOp first_w, steps_w;      // [K, PW], int32: columns'

  // The arrays a sample loop carries, in the order of the Carried indices.
  std::vector<xla::XlaOp> carried() const {
    return {start_h, start_w,   bin_h,     bin_w,   grid_h,  grid_w,  ok,
            batch,   floored_h, floored_w, first_h, steps_h, first_w, steps_w};
  }
};
enum Carried {
  kStartH,
  kStartW,
  kBinH,
  kBinW,
  kGridH,
  kGridW,
  kOk,
  kBatch,
  kFlooredH,
  kFlooredW,
  kFirstH,
  kStepsH,
  kFirstW,
  kStepsW,
};

AlignBoxes MakeAlignBoxes(const Call& c, const Boxes& boxes);

// Sample (iy, ix) of every bin: its corner indices and weights and whether
// the bin has it and it lands on the map ([K, PH, PW]).
struct Samples {
  xla::XlaOp valid;
  std::vector<xla::XlaOp> y, x;  // corner j: (y[j], x[j])
  std::vector<xla::XlaOp> weight;
  xla::XlaOp ly, lx, y_moves, x_moves;  // as BilinearSample's
  xla::XlaOp iy, ix;  // the sample's index in its grid: [K, PH], [K, PW]
};

// `box` is AlignBoxes::carried(); iy and ix count samples from each bin's
// first (SampleRanges).
Samples SampleBins(const Call& c, const std::vector<xla::XlaOp>& box,
                   xla::XlaOp iy, xla::XlaOp ix);

// The most steps of the ranges `steps` ([K, bins]) of the boxes that are ok.
xla::XlaOp MaxSteps(const Call& c, xla::XlaOp steps, xla::XlaOp ok,
                    int64_t bins);

// SampleLoop over the sample ranges of `box`, with the boxes carried in the
// loop state: body(cb, boxes, samples, index, values) returns the new
// `values`; boxes is the loop's AlignBoxes::carried().
template <typename Body>
StatusOr<std::vector<xla::XlaOp>> AlignSampleLoop(
    const Call& c, const AlignBoxes& box, std::vector<xla::XlaOp> values,
    const char* name, Body body) {
  return CarryBoxes(
      c, MaxSteps(c, box.steps_h, box.ok, c.attrs.pooled_height),
      MaxSteps(c, box.steps_w, box.ok, c.attrs.pooled_width), box.carried(),
      std::move(values), name,
      [&](const Call& cb, const std::vector<xla::XlaOp>& b, xla::XlaOp iy,
          xla::XlaOp ix, std::vector<xla::XlaOp> v) {
        return body(cb, b, SampleBins(cb, b, iy, ix),
                    MakeBinIndex(cb, b[kBatch]), std::move(v));
      });
}

}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_ALIGN_LOWERING_HELPERS_H_
