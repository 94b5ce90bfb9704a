#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_align_lowering_helpers.h"

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace tensorflow {
namespace customops {
namespace roi {
namespace hlo {

namespace {

// The first bin position start + bin * bin_size of the `bins` bins along an
// axis of every box: [K, bins].
xla::XlaOp BinStarts(const Call& c, xla::XlaOp start, xla::XlaOp bin_size,
                     int64_t bins) {
  const std::vector<int64_t> dims = {c.shape.num_rois, bins};
  const auto per_box = [&](xla::XlaOp v) {
    return xla::BroadcastInDim(v, dims, {0});
  };
  return xla::Add(per_box(start),
                  xla::Mul(c.Iota(c.acc, dims, 1), per_box(bin_size)));
}

// SampleRange for every bin along one axis of `size` pixels: the first
// sample and the number of samples from it, [K, bins] each.
std::pair<xla::XlaOp, xla::XlaOp> SampleRanges(const Call& c, xla::XlaOp start,
                                               xla::XlaOp bin_size,
                                               xla::XlaOp grid, int64_t bins,
                                               int64_t size) {
  const std::vector<int64_t> dims = {c.shape.num_rois, bins};
  const auto per_box = [&](xla::XlaOp v) {
    return xla::BroadcastInDim(v, dims, {0});
  };
  // Plain divisions: a range only has to hold every sample on the map, and
  // Divide's barrier cannot take a bounded-dynamic number of boxes.
  const xla::XlaOp grid_a = per_box(xla::ConvertElementType(grid, c.acc));
  const xla::XlaOp bin = per_box(bin_size);
  const xla::XlaOp step = xla::Div(bin, grid_a);
  const xla::XlaOp base = BinStarts(c, start, bin_size, bins);
  const double epsilon = c.acc == xla::F64 ? 0x1p-52 : 0x1p-23;
  const xla::XlaOp magnitude =
      xla::Add(xla::Add(xla::Abs(base), bin), c.A(static_cast<double>(size)));
  const xla::XlaOp margin =
      xla::Add(c.A(2), xla::Div(xla::Mul(c.A(16 * epsilon), magnitude), step));
  const xla::XlaOp lo = xla::Sub(
      xla::Sub(xla::Div(xla::Sub(c.A(-1), base), step), c.A(0.5)), margin);
  const xla::XlaOp hi = xla::Add(
      xla::Sub(xla::Div(xla::Sub(c.A(static_cast<double>(size)), base), step),
               c.A(0.5)),
      margin);
  // Clamped below 2^31 before the conversion; NaN (a box that is not ok)
  // gives the whole grid, as in the kernels.
  const xla::XlaOp cap = c.A(2147483520.0);
  const auto to_int = [&](xla::XlaOp v) {
    return xla::ConvertElementType(
        xla::Min(xla::Max(v, xla::ZerosLike(v)), xla::Broadcast(cap, dims)),
        xla::S32);
  };
  const xla::XlaOp whole = per_box(grid);
  const xla::XlaOp zero = xla::Broadcast(c.I(0), dims);
  const xla::XlaOp first =
      xla::Select(xla::Gt(lo, xla::ZerosLike(lo)),
                  xla::Select(xla::Lt(lo, grid_a), to_int(lo), whole), zero);
  xla::XlaOp last = xla::Select(xla::Lt(hi, xla::Sub(grid_a, c.A(1))),
                                xla::Select(xla::Gt(hi, xla::ZerosLike(hi)),
                                            xla::Add(to_int(hi), c.I(1)), zero),
                                whole);
  last = xla::Max(last, first);
  // A bin without samples (bin_size <= 0 or grid <= 0) has none.
  const xla::XlaOp any =
      xla::And(xla::Gt(bin, xla::ZerosLike(bin)), xla::Gt(whole, zero));
  const xla::XlaOp none = xla::Max(whole, zero);
  return {xla::Select(any, first, zero),
          xla::Select(any, xla::Sub(last, first), none)};
}

// Bilinear's clamping along one axis of `size` pixels, for sample positions
// `p`: whether the position is on the map, the two pixel indices and their
// weights (high side l, low side h).
struct AxisSample {
  xla::XlaOp valid, low, high, l, h;
  xla::XlaOp moves;  // not clamped to the border: BilinearSample's
};

AxisSample Axis(const Call& c, xla::XlaOp p, int64_t size) {
  AxisSample s;
  s.valid = xla::Not(xla::Or(xla::Lt(p, c.A(-1)), xla::Gt(p, c.A(size))));
  const xla::XlaOp at_start = xla::Le(p, c.A(0));
  p = xla::Select(at_start, xla::ZerosLike(p), p);
  const xla::XlaOp last = c.A(size - 1);
  const xla::XlaOp at_end = xla::Ge(p, last);
  s.moves = xla::Not(xla::Or(at_start, at_end));
  p = xla::Select(at_end, xla::Add(xla::ZerosLike(p), last), p);
  // Invalid (or NaN) positions get index 0; their samples are dropped.
  s.low = xla::ConvertElementType(xla::Select(s.valid, p, xla::ZerosLike(p)),
                                  xla::S32);
  s.high = xla::Select(at_end, s.low, xla::Add(s.low, c.I(1)));
  s.l = xla::Sub(p, xla::ConvertElementType(s.low, c.acc));
  s.h = xla::Sub(c.A(1), s.l);
  return s;
}

// SamplePoint i[k, bin] along one axis for the bins of every box: [K, bins].
xla::XlaOp SamplePoints(const Call& c, xla::XlaOp start, xla::XlaOp bin_size,
                        xla::XlaOp grid, xla::XlaOp i, int64_t bins) {
  const std::vector<int64_t> dims = {c.shape.num_rois, bins};
  const auto per_box = [&](xla::XlaOp v) {
    return xla::BroadcastInDim(v, dims, {0});
  };
  const xla::XlaOp offset =
      Divide(xla::Mul(xla::Add(xla::ConvertElementType(i, c.acc), c.A(0.5)),
                      per_box(bin_size)),
             per_box(xla::ConvertElementType(grid, c.acc)));
  return xla::Add(BinStarts(c, start, bin_size, bins), offset);
}

// Sample `step` of each bin's range along an axis: its index in the bin's
// grid, and whether the range has it ([K, bins] each).
std::pair<xla::XlaOp, xla::XlaOp> RangeSample(xla::XlaOp first,
                                              xla::XlaOp steps,
                                              xla::XlaOp step) {
  return {xla::Add(first, step), xla::Lt(step, steps)};
}

}  // namespace

AlignBoxes MakeAlignBoxes(const Call& c, const Boxes& boxes) {
  const RoiAttrs& a = c.attrs;
  const auto col = [&](int i) {
    return xla::ConvertElementType(boxes.column[i], c.acc);
  };
  const xla::XlaOp offset = c.A(a.aligned ? 0.5 : 0);
  const xla::XlaOp scale = c.A(a.spatial_scale);
  AlignBoxes box;
  box.start_w = xla::Sub(xla::Mul(col(1), scale), offset);
  box.start_h = xla::Sub(xla::Mul(col(2), scale), offset);
  xla::XlaOp roi_w =
      xla::Sub(xla::Sub(xla::Mul(col(3), scale), offset), box.start_w);
  xla::XlaOp roi_h =
      xla::Sub(xla::Sub(xla::Mul(col(4), scale), offset), box.start_h);
  const xla::XlaOp no =
      xla::Broadcast(xla::ConstantR0<bool>(c.b, false), {c.shape.num_rois});
  box.floored_w = box.floored_h = no;
  if (!a.position_sensitive() && !a.aligned) {
    box.floored_w = xla::Not(xla::Gt(roi_w, c.A(1)));
    box.floored_h = xla::Not(xla::Gt(roi_h, c.A(1)));
    roi_w = xla::Select(box.floored_w, c.A(1), roi_w);
    roi_h = xla::Select(box.floored_h, c.A(1), roi_h);
  }
  box.bin_h = Divide(roi_h, c.A(a.pooled_height));
  box.bin_w = Divide(roi_w, c.A(a.pooled_width));
  const int64_t k = c.shape.num_rois;
  if (a.sampling_ratio > 0) {
    box.grid_h = xla::Broadcast(c.I(a.sampling_ratio), {k});
    box.grid_w = box.grid_h;
  } else {
    // AdaptiveGrid: the ceiling, clamped (NaN included) before conversion.
    const xla::XlaOp limit = c.A(static_cast<double>(roi::kMaxGrid));
    const auto grid = [&](xla::XlaOp bin) {
      const xla::XlaOp g = xla::Ceil(bin);
      const xla::XlaOp fits = xla::Lt(g, limit);
      return xla::Select(fits,
                         xla::ConvertElementType(
                             xla::Select(fits, g, xla::ZerosLike(g)), xla::S32),
                         xla::Broadcast(c.I(roi::kMaxGrid), {k}));
    };
    box.grid_h = grid(box.bin_h);
    box.grid_w = grid(box.bin_w);
  }
  const xla::XlaOp count =
      xla::Mul(xla::ConvertElementType(box.grid_h, xla::S64),
               xla::ConvertElementType(box.grid_w, xla::S64));
  box.count = xla::ConvertElementType(
      xla::Max(count, xla::ConstantR0<int64_t>(c.b, 1)), c.acc);
  box.ok = boxes.ok;
  box.batch = boxes.batch;
  std::tie(box.first_h, box.steps_h) = SampleRanges(
      c, box.start_h, box.bin_h, box.grid_h, a.pooled_height, c.shape.height);
  std::tie(box.first_w, box.steps_w) = SampleRanges(
      c, box.start_w, box.bin_w, box.grid_w, a.pooled_width, c.shape.width);
  return box;
}

Samples SampleBins(const Call& c, const std::vector<xla::XlaOp>& box,
                   xla::XlaOp iy, xla::XlaOp ix) {
  const int64_t ph = c.attrs.pooled_height, pw = c.attrs.pooled_width;
  const auto [row, in_row] = RangeSample(box[kFirstH], box[kStepsH], iy);
  const auto [column, in_column] = RangeSample(box[kFirstW], box[kStepsW], ix);
  const AxisSample y =
      Axis(c, SamplePoints(c, box[kStartH], box[kBinH], box[kGridH], row, ph),
           c.shape.height);
  const AxisSample x = Axis(
      c, SamplePoints(c, box[kStartW], box[kBinW], box[kGridW], column, pw),
      c.shape.width);
  Samples s;
  s.iy = row;
  s.ix = column;
  s.valid = xla::And(c.PerBox(box[kOk]),
                     xla::And(c.PerRow(xla::And(in_row, y.valid)),
                              c.PerColumn(xla::And(in_column, x.valid))));
  const xla::XlaOp y_low = c.PerRow(y.low), y_high = c.PerRow(y.high);
  const xla::XlaOp x_low = c.PerColumn(x.low), x_high = c.PerColumn(x.high);
  s.y = {y_low, y_low, y_high, y_high};
  s.x = {x_low, x_high, x_low, x_high};
  const xla::XlaOp ly = c.PerRow(y.l), hy = c.PerRow(y.h);
  const xla::XlaOp lx = c.PerColumn(x.l), hx = c.PerColumn(x.h);
  s.weight = {xla::Mul(hy, hx), xla::Mul(hy, lx), xla::Mul(ly, hx),
              xla::Mul(ly, lx)};
  s.ly = ly;
  s.lx = lx;
  s.y_moves = c.PerRow(y.moves);
  s.x_moves = c.PerColumn(x.moves);
  return s;
}

xla::XlaOp MaxSteps(const Call& c, xla::XlaOp steps, xla::XlaOp ok,
                    int64_t bins) {
  return MaskedMax(c, steps,
                   xla::BroadcastInDim(ok, {c.shape.num_rois, bins}, {0}));
}

}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
