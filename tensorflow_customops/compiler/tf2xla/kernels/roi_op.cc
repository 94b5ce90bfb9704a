// XLA lowerings of the RoI ops (RoiAlign, RoiPool, PsRoiAlign, PsRoiPool) and
// their gradients, as HLO: gathers, scatters and elementwise arithmetic, so
// the same lowering serves every XLA backend.
//
// Each output bin is a loop over its samples (bilinear kinds) or pixels
// (pooling kinds). A bin's sample count depends on the box, so the loop is an
// HLO while loop over sample t = (iy, ix) that treats every bin at once and
// masks the samples a bin does not have; trip count is the largest range of
// samples that can land on the map (SampleRanges; the largest bin for the
// pooling kinds) of the call, however large the grids. The arithmetic repeats
// the regular kernels' operations in their order (roi_geometry.h,
// roi_align_op.h): the pooling kinds give their bits, the bilinear kinds differ
// where XLA's CPU backend fuses multiply-adds into FMAs, and gradients add the
// same terms in another order.
//
// Data checks that the regular kernels raise (ValidateRois, argmax range)
// cannot raise inside a compiled program: a box
// that fails them gives zeros and no gradient, and an out-of-range argmax
// entry is skipped. Attr and shape checks are the regular kernels' own
// (roi_args), at compile time.

#include <cfloat>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/roi_custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"
#include "tensorflow_customops/core/kernels/roi/roi_args.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace {

using roi::RoiAttrs;
using roi::RoiKind;
using roi::RoiShape;

// Sizes and types of one call. Features are handled as a 6-D
// [B, H, W, C_out, G_h, G_w] view of the NHWC map, where the channel read by
// output channel c of bin (ph, pw) is (c, ph, pw) for the position-sensitive
// ops (G = pooled size) and (c, 0, 0) for the others (G = 1).
struct Call {
  RoiAttrs attrs;
  RoiShape shape;
  xla::PrimitiveType type;   // of the features
  xla::PrimitiveType acc;    // accumulation type, as roi::AccumulatorType
  xla::PrimitiveType boxes;  // of the boxes: F32, or F64 with F64 features
  xla::XlaBuilder* b;
  // The boxes' count, where it is bounded-dynamic (boxes from
  // tf.boolean_mask): the HLO computes on the boxes padded to their bound
  // (Padded), masks the padding ones (ReadBoxes) and gives outputs whose rows
  // are boxes their dynamic count back (BoxRows).
  bool dynamic_boxes = false;
  xla::XlaOp num_boxes;

  int64_t group_h() const {
    return attrs.position_sensitive() ? attrs.pooled_height : 1;
  }
  int64_t group_w() const {
    return attrs.position_sensitive() ? attrs.pooled_width : 1;
  }
  std::vector<int64_t> view_dims() const {
    return {shape.batch,        shape.height, shape.width,
            shape.out_channels, group_h(),    group_w()};
  }
  std::vector<int64_t> bins_dims() const {
    return {shape.num_rois, attrs.pooled_height, attrs.pooled_width};
  }
  std::vector<int64_t> pooled_dims() const {
    return {shape.num_rois, attrs.pooled_height, attrs.pooled_width,
            shape.out_channels};
  }
  bool empty() const {
    return shape.batch == 0 || shape.height == 0 || shape.width == 0 ||
           shape.out_channels == 0 || shape.num_rois == 0;
  }

  xla::XlaOp Const(xla::PrimitiveType t, double v) const {
    return xla::ConstantR0WithType(b, t, v);
  }
  xla::XlaOp A(double v) const { return Const(acc, v); }
  xla::XlaOp I(int64_t v) const { return xla::ConstantR0<int32_t>(b, v); }
  // Iota along `dim` of an array of `dims`.
  xla::XlaOp Iota(xla::PrimitiveType t, std::vector<int64_t> dims,
                  int64_t dim) const {
    return xla::Iota(b, xla::ShapeUtil::MakeShape(t, dims), dim);
  }
  xla::XlaOp Zeros(xla::PrimitiveType t, absl::Span<const int64_t> dims) const {
    return xla::Broadcast(xla::Zero(b, t), dims);
  }
  // A per-box [K] or per-(box, row) [K, PH] or per-(box, column) [K, PW]
  // array broadcast to the bins [K, PH, PW].
  xla::XlaOp PerBox(xla::XlaOp v) const {
    return xla::BroadcastInDim(v, bins_dims(), {0});
  }
  xla::XlaOp PerRow(xla::XlaOp v) const {
    return xla::BroadcastInDim(v, bins_dims(), {0, 1});
  }
  xla::XlaOp PerColumn(xla::XlaOp v) const {
    return xla::BroadcastInDim(v, bins_dims(), {0, 2});
  }
  // A per-bin [K, PH, PW] array broadcast over the output channels.
  xla::XlaOp PerBin(xla::XlaOp v) const {
    return xla::BroadcastInDim(v, pooled_dims(), {0, 1, 2});
  }
};

// x / y, where XLA may not turn the division into a multiplication by the
// reciprocal (it does for constant divisors, and 7 * (1/3) rounds above 7/3
// where 7/3 rounds below it), so that quotients keep the regular kernels'
// bits and bin bounds.
xla::XlaOp Divide(xla::XlaOp x, xla::XlaOp y) {
  return xla::Div(x, xla::OptimizationBarrier(y));
}

Status MakeCall(XlaOpKernelContext* context, const RoiAttrs& attrs,
                const TensorShape& features_shape, const char* features_name,
                Call* call, int rois_input = 1) {
  call->attrs = attrs;
  call->b = context->builder();
  TF_RETURN_IF_ERROR(
      roi::GetFeatureSizes(features_shape, attrs, features_name, &call->shape));
  TF_RETURN_IF_ERROR(
      roi::CheckRoisShape(context->InputShape(rois_input), &call->shape));
  const xla::XlaOp rois = context->Input(rois_input);
  call->boxes = context->input_xla_type(rois_input);
  call->dynamic_boxes = call->b->GetShape(rois)->is_dynamic_dimension(0);
  call->num_boxes = xla::GetDimensionSize(rois, 0);
  TensorShape pooled;
  TF_RETURN_IF_ERROR(roi::PooledShape(call->shape, attrs, &pooled));
  return OkStatus();
}

// Input i without dynamic dimensions: padded to their bounds.
xla::XlaOp Padded(XlaOpKernelContext* context, int i) {
  xla::XlaOp x = context->Input(i);
  const xla::Shape shape = *context->builder()->GetShape(x);
  for (int d = 0; d < shape.dimensions_size(); ++d) {
    if (shape.is_dynamic_dimension(d)) x = xla::RemoveDynamicDimension(x, d);
  }
  return x;
}

// An output whose rows are the boxes, with their dynamic count.
xla::XlaOp BoxRows(const Call& c, xla::XlaOp x) {
  return c.dynamic_boxes ? xla::SetDimensionSize(x, c.num_boxes, 0) : x;
}

void SetTypes(xla::PrimitiveType type, Call* call) {
  call->type = type;
  call->acc = type == xla::F64 ? xla::F64 : xla::F32;
}

// NCHW <-> NHWC for the features and the pooled tensors.
xla::XlaOp ToChannelsLast(const Call& c, xla::XlaOp x) {
  return c.attrs.nchw ? xla::Transpose(x, {0, 2, 3, 1}) : x;
}
xla::XlaOp ToDataFormat(const Call& c, xla::XlaOp x) {
  return c.attrs.nchw ? xla::Transpose(x, {0, 3, 1, 2}) : x;
}

// The boxes, one [K] array per column, with `ok` (which boxes pass the
// regular kernels' ValidateRois) and their batch indices (0 where not ok).
struct Boxes {
  std::vector<xla::XlaOp> column;  // of the boxes' type
  xla::XlaOp ok;
  xla::XlaOp batch;  // int32
};

Boxes ReadBoxes(const Call& c, xla::XlaOp rois) {
  Boxes boxes;
  const int64_t k = c.shape.num_rois;
  xla::XlaOp ok = xla::Broadcast(xla::ConstantR0<bool>(c.b, true), {k});
  for (int i = 0; i < 5; ++i) {
    const xla::XlaOp column =
        xla::Reshape(xla::Slice(rois, {0, i}, {k, i + 1}, {1, 1}), {k});
    boxes.column.push_back(column);
    ok = xla::And(ok, xla::IsFinite(column));
    if (i > 0) {
      const xla::XlaOp scaled =
          xla::Mul(xla::ConvertElementType(column, xla::F64),
                   c.Const(xla::F64, c.attrs.spatial_scale));
      ok = xla::And(ok, xla::Le(xla::Abs(scaled),
                                c.Const(xla::F64, roi::kMaxScaledCoordinate)));
    }
  }
  const xla::XlaOp index = boxes.column[0];
  ok = xla::And(ok, xla::Eq(index, xla::Floor(index)));
  ok = xla::And(ok, xla::Ge(index, c.Const(c.boxes, 0)));
  ok = xla::And(ok, xla::Lt(index, c.Const(c.boxes, c.shape.batch)));
  if (c.dynamic_boxes) {
    ok = xla::And(ok, xla::Lt(xla::Iota(c.b, xla::S32, k),
                              xla::Broadcast(c.num_boxes, {k})));
  }
  boxes.ok = ok;
  boxes.batch = xla::ConvertElementType(
      xla::Select(ok, index, xla::ZerosLike(index)), xla::S32);
  return boxes;
}

// The largest of the int32 `values` where `mask` holds, or 0.
xla::XlaOp MaskedMax(const Call& c, xla::XlaOp values, xla::XlaOp mask) {
  return xla::ReduceAll(xla::Select(mask, values, xla::ZerosLike(values)),
                        c.I(0), xla::CreateScalarMaxComputation(xla::S32, c.b));
}

// The index arrays (b, y, x, gy, gx), int32 [K, PH, PW] each, as the
// [K, PH, PW, 5] start indices of a gather or scatter over the 6-D view,
// which addresses a C_out window at every index.
constexpr int64_t kIndexedDims[] = {0, 1, 2, 4, 5};

xla::XlaOp BinIndices(const Call& c, const std::vector<xla::XlaOp>& index) {
  std::vector<xla::XlaOp> parts;
  for (const xla::XlaOp& i : index) {
    parts.push_back(xla::Reshape(
        i, {c.shape.num_rois, c.attrs.pooled_height, c.attrs.pooled_width, 1}));
  }
  return xla::ConcatInDim(c.b, parts, 3);
}

// Gathers features[b, y, x, :, gy, gx] for every bin: [K, PH, PW, C_out].
xla::XlaOp GatherBins(const Call& c, xla::XlaOp features,
                      const std::vector<xla::XlaOp>& index) {
  xla::GatherDimensionNumbers dims;
  dims.add_offset_dims(3);
  for (int64_t d : kIndexedDims) {
    dims.add_collapsed_slice_dims(d);
    dims.add_start_index_map(d);
  }
  dims.set_index_vector_dim(3);
  return xla::Gather(features, BinIndices(c, index), dims,
                     {1, 1, 1, c.shape.out_channels, 1, 1});
}

// grad[b, y, x, :, gy, gx] += updates[k, ph, pw, :] for every bin, in bin
// order; a bin whose y index is out of range (height) is skipped.
xla::XlaOp ScatterAddBins(const Call& c, xla::XlaOp grad,
                          const std::vector<xla::XlaOp>& index,
                          xla::XlaOp updates) {
  xla::ScatterDimensionNumbers dims;
  dims.add_update_window_dims(3);
  for (int64_t d : kIndexedDims) {
    dims.add_inserted_window_dims(d);
    dims.add_scatter_dims_to_operand_dims(d);
  }
  dims.set_index_vector_dim(3);
  return xla::Scatter(grad, BinIndices(c, index), updates,
                      xla::CreateScalarAddComputation(c.acc, c.b), dims);
}

// The (gy, gx) index arrays of the 6-D view.
std::vector<xla::XlaOp> GroupIndex(const Call& c) {
  if (!c.attrs.position_sensitive()) {
    const xla::XlaOp zero = c.Zeros(xla::S32, c.bins_dims());
    return {zero, zero};
  }
  return {c.Iota(xla::S32, c.bins_dims(), 1),
          c.Iota(xla::S32, c.bins_dims(), 2)};
}

// ---------------------------------------------------------------------------
// Bilinear kinds.

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

// Sample (iy, ix) of every bin: its corner indices and weights and whether
// the bin has it and it lands on the map ([K, PH, PW]).
struct Samples {
  xla::XlaOp valid;
  std::vector<xla::XlaOp> y, x;  // corner j: (y[j], x[j])
  std::vector<xla::XlaOp> weight;
  xla::XlaOp ly, lx, y_moves, x_moves;  // as BilinearSample's
  xla::XlaOp iy, ix;  // the sample's index in its grid: [K, PH], [K, PW]
};

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

// `box` is AlignBoxes::carried(); iy and ix count samples from each bin's
// first (SampleRanges).
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

// Runs body(inner, iy, ix, values) over the samples t = iy * steps_w + ix of
// every grid, t < steps_h * steps_w, and returns the final `values`; body
// returns the new ones, building with `inner` (c on the loop body's builder).
// The loop state is {t, steps_w, steps} followed by `values`.
template <typename Body>
StatusOr<std::vector<xla::XlaOp>> SampleLoop(const Call& c, xla::XlaOp steps_h,
                                             xla::XlaOp steps_w,
                                             std::vector<xla::XlaOp> values,
                                             const char* name, Body body) {
  values.insert(values.begin(), {c.I(0), steps_w, xla::Mul(steps_h, steps_w)});
  TF_ASSIGN_OR_RETURN(
      std::vector<xla::XlaOp> result,
      xla::WhileLoopHelper(
          [](absl::Span<const xla::XlaOp> v, xla::XlaBuilder*)
              -> StatusOr<xla::XlaOp> { return xla::Lt(v[0], v[2]); },
          [&](absl::Span<const xla::XlaOp> v,
              xla::XlaBuilder* builder) -> StatusOr<std::vector<xla::XlaOp>> {
            const xla::XlaOp iy = xla::Div(v[0], v[1]);
            const xla::XlaOp ix = xla::Rem(v[0], v[1]);
            std::vector<xla::XlaOp> state(v.begin() + 3, v.end());
            Call inner = c;
            inner.b = builder;
            std::vector<xla::XlaOp> next = body(inner, iy, ix, state);
            next.insert(next.begin(),
                        {xla::Add(v[0], xla::ConstantR0<int32_t>(builder, 1)),
                         v[1], v[2]});
            return next;
          },
          values, name, c.b));
  result.erase(result.begin(), result.begin() + 3);
  return result;
}

// A bin's indices into the 6-D view besides y and x, each [K, PH, PW]: its
// box's batch index and its channel group (gy, gx).
struct BinIndex {
  xla::XlaOp batch, gy, gx;
};

BinIndex MakeBinIndex(const Call& c, xla::XlaOp batch) {
  const std::vector<xla::XlaOp> groups = GroupIndex(c);
  return {c.PerBox(batch), groups[0], groups[1]};
}

// SampleLoop with per-box values `boxes` carried in the loop state after
// `values`: body(cb, b, iy, ix, values) gets the loop's copies of the boxes as
// b and returns the new `values`.
template <typename Body>
StatusOr<std::vector<xla::XlaOp>> CarryBoxes(
    const Call& c, xla::XlaOp limit_y, xla::XlaOp limit_x,
    const std::vector<xla::XlaOp>& boxes, std::vector<xla::XlaOp> values,
    const char* name, Body body) {
  const size_t n = values.size();
  values.insert(values.end(), boxes.begin(), boxes.end());
  TF_ASSIGN_OR_RETURN(
      std::vector<xla::XlaOp> result,
      SampleLoop(c, limit_y, limit_x, values, name,
                 [&](const Call& cb, xla::XlaOp iy, xla::XlaOp ix,
                     std::vector<xla::XlaOp> v) {
                   const std::vector<xla::XlaOp> b(v.begin() + n, v.end());
                   std::vector<xla::XlaOp> next =
                       body(cb, b, iy, ix,
                            std::vector<xla::XlaOp>(v.begin(), v.begin() + n));
                   next.insert(next.end(), b.begin(), b.end());
                   return next;
                 }));
  result.resize(n);
  return result;
}

// The most steps of the ranges `steps` ([K, bins]) of the boxes that are ok.
xla::XlaOp MaxSteps(const Call& c, xla::XlaOp steps, xla::XlaOp ok,
                    int64_t bins) {
  return MaskedMax(c, steps,
                   xla::BroadcastInDim(ok, {c.shape.num_rois, bins}, {0}));
}

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

// What every RoI lowering holds: its kind's attrs, read and checked as the
// regular kernels read them.
class RoiXlaOpKernel : public XlaOpKernel {
 public:
  RoiXlaOpKernel(OpKernelConstruction* context, RoiKind kind)
      : XlaOpKernel(context), custom_call_(context) {
    OP_REQUIRES_OK(context, roi::ReadRoiAttrs(context, kind, &attrs_));
    DataType boxes;
    OP_REQUIRES_OK(context, roi::ReadBoxesDtype(context, &boxes));
  }

 protected:
  RoiAttrs attrs_;
  // Where it applies, the lowering instead of the HLO below.
  roi::RoiCustomCall custom_call_;
};

class RoiAlignOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    OP_REQUIRES_OK(context, MakeCall(context, attrs_, context->InputShape(0),
                                     "features", &c));
    if (custom_call_.Compile(context, roi::RoiOpRole::kForward, attrs_,
                             c.shape)) {
      return;
    }
    SetTypes(context->input_xla_type(0), &c);
    if (c.empty()) {
      context->SetOutput(
          0, BoxRows(c, ToDataFormat(c, c.Zeros(c.type, c.pooled_dims()))));
      return;
    }
    const xla::XlaOp features = xla::Reshape(
        xla::ConvertElementType(ToChannelsLast(c, Padded(context, 0)), c.acc),
        c.view_dims());
    const AlignBoxes box = MakeAlignBoxes(c, ReadBoxes(c, Padded(context, 1)));
    auto result = AlignSampleLoop(
        c, box, {c.Zeros(c.acc, c.pooled_dims()), features},
        "roi_align_samples",
        [&](const Call& cb, const std::vector<xla::XlaOp>&, const Samples& s,
            const BinIndex& bin, std::vector<xla::XlaOp> v) {
          xla::XlaOp sum;
          for (int j = 0; j < 4; ++j) {
            const xla::XlaOp value = GatherBins(
                cb, v[1], {bin.batch, s.y[j], s.x[j], bin.gy, bin.gx});
            const xla::XlaOp term = xla::Mul(cb.PerBin(s.weight[j]), value);
            sum = j == 0 ? term : xla::Add(sum, term);
          }
          v[0] = xla::Select(cb.PerBin(s.valid), xla::Add(v[0], sum), v[0]);
          return v;
        });
    OP_REQUIRES_OK(context, result.status());
    const xla::XlaOp count =
        xla::BroadcastInDim(box.count, c.pooled_dims(), {0});
    context->SetOutput(
        0,
        BoxRows(c, ToDataFormat(c, xla::ConvertElementType(
                                       Divide((*result)[0], count), c.type))));
  }
};

class RoiAlignGradOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    TensorShape features_shape;
    OP_REQUIRES_OK(context, ReadFeaturesShape(context, &features_shape));
    OP_REQUIRES_OK(context, MakeCall(context, attrs_, features_shape,
                                     "features_shape", &c));
    OP_REQUIRES_OK(context,
                   roi::CheckPooledGradShape(context->InputShape(0), c.shape,
                                             attrs_, "grads"));
    if (custom_call_.Compile(context, roi::RoiOpRole::kGrad, attrs_, c.shape)) {
      return;
    }
    SetTypes(context->input_xla_type(0), &c);
    if (c.empty()) {
      context->SetOutput(0, c.Zeros(c.type, features_shape.dim_sizes()));
      return;
    }
    const AlignBoxes box = MakeAlignBoxes(c, ReadBoxes(c, Padded(context, 1)));
    const xla::XlaOp grads = Divide(
        xla::ConvertElementType(ToChannelsLast(c, Padded(context, 0)), c.acc),
        xla::BroadcastInDim(box.count, c.pooled_dims(), {0}));
    auto result = AlignSampleLoop(
        c, box, {c.Zeros(c.acc, c.view_dims()), grads},
        "roi_align_grad_samples",
        [&](const Call& cb, const std::vector<xla::XlaOp>&, const Samples& s,
            const BinIndex& bin, std::vector<xla::XlaOp> v) {
          const xla::XlaOp valid = cb.PerBin(s.valid);
          for (int j = 0; j < 4; ++j) {
            const xla::XlaOp y = xla::Select(
                s.valid, s.y[j],
                xla::Broadcast(cb.I(cb.shape.height), cb.bins_dims()));
            const xla::XlaOp update =
                xla::Select(valid, xla::Mul(v[1], cb.PerBin(s.weight[j])),
                            xla::ZerosLike(v[1]));
            v[0] = ScatterAddBins(
                cb, v[0], {bin.batch, y, s.x[j], bin.gy, bin.gx}, update);
          }
          return v;
        });
    OP_REQUIRES_OK(context, result.status());
    const xla::XlaOp grad = xla::Reshape(
        xla::ConvertElementType((*result)[0], c.type),
        {c.shape.batch, c.shape.height, c.shape.width, c.shape.channels});
    context->SetOutput(0, ToDataFormat(c, grad));
  }

  // The gradient ops' features_shape input, a compile-time constant.
  static Status ReadFeaturesShape(XlaOpKernelContext* context,
                                  TensorShape* shape) {
    const int index = context->num_inputs() - 1;
    std::vector<int64_t> values;
    TF_RETURN_IF_ERROR(context->ConstantInputAsIntVector(index, &values));
    return roi::FeaturesShapeFromValues(context->InputShape(index), values,
                                        shape);
  }
};

// ---------------------------------------------------------------------------
// Pooling kinds.

// Bins of PoolBin along one axis for every box: [K, bins] int32 [lo, hi).
struct PoolRanges {
  xla::XlaOp lo, hi;
};

PoolRanges MakePoolRanges(const Call& c, const Boxes& boxes, int start_column,
                          int bins, int64_t size) {
  const bool ps = c.attrs.position_sensitive();
  const int64_t k = c.shape.num_rois;
  const auto rounded = [&](int column) {
    // Non-finite or huge coordinates are replaced (their boxes are not ok),
    // so that the conversion is defined.
    const xla::XlaOp v = xla::Select(boxes.ok, boxes.column[column],
                                     xla::ZerosLike(boxes.column[column]));
    return xla::ConvertElementType(
        xla::Round(xla::Mul(xla::ConvertElementType(v, c.acc),
                            c.A(c.attrs.spatial_scale))),
        xla::S64);
  };
  const xla::XlaOp start = rounded(start_column);
  const xla::XlaOp end = rounded(start_column + 2);
  xla::XlaOp extent = xla::Sub(end, start);
  if (!ps) extent = xla::Add(extent, xla::ConstantR0<int64_t>(c.b, 1));
  extent = xla::Max(extent, xla::ConstantR0<int64_t>(c.b, 1));
  const std::vector<int64_t> dims = {k, bins};
  const auto per_box = [&](xla::XlaOp v) {
    return xla::BroadcastInDim(v, dims, {0});
  };
  const xla::XlaOp bin_size =
      per_box(Divide(xla::ConvertElementType(extent, c.acc), c.A(bins)));
  const xla::XlaOp bin = c.Iota(c.acc, dims, 1);
  xla::XlaOp lo = xla::Add(
      xla::ConvertElementType(xla::Floor(xla::Mul(bin, bin_size)), xla::S64),
      per_box(start));
  xla::XlaOp hi = xla::Add(
      xla::ConvertElementType(
          xla::Ceil(xla::Mul(xla::Add(bin, c.A(1)), bin_size)), xla::S64),
      per_box(start));
  const xla::XlaOp zero = xla::ConstantR0<int64_t>(c.b, 0);
  const xla::XlaOp limit = xla::ConstantR0<int64_t>(c.b, ps ? size - 1 : size);
  return {xla::ConvertElementType(xla::Clamp(zero, lo, limit), xla::S32),
          xla::ConvertElementType(xla::Clamp(zero, hi, limit), xla::S32)};
}

// Pixel (dy, dx) of every bin: its position and whether the bin has it.
struct Pixels {
  xla::XlaOp valid, y, x;  // [K, PH, PW]
};

// pool: h_lo, h_hi, w_lo, w_hi, ok.
Pixels BinPixels(const Call& c, const std::vector<xla::XlaOp>& pool,
                 xla::XlaOp dy, xla::XlaOp dx) {
  Pixels p;
  const xla::XlaOp y = xla::Add(pool[0], dy);
  const xla::XlaOp x = xla::Add(pool[2], dx);
  p.valid =
      xla::And(c.PerBox(pool[4]), xla::And(c.PerRow(xla::Lt(y, pool[1])),
                                           c.PerColumn(xla::Lt(x, pool[3]))));
  p.y = c.PerRow(y);
  p.x = c.PerColumn(x);
  return p;
}

struct PoolBoxes {
  PoolRanges h, w;
  xla::XlaOp ok, batch;
  xla::XlaOp empty;  // [K, PH, PW]: the bin has no pixel, or the box not ok
  xla::XlaOp area;   // [K, PH, PW], acc
};

PoolBoxes MakePoolBoxes(const Call& c, xla::XlaOp rois) {
  const Boxes boxes = ReadBoxes(c, rois);
  PoolBoxes p;
  p.h = MakePoolRanges(c, boxes, 2, c.attrs.pooled_height, c.shape.height);
  p.w = MakePoolRanges(c, boxes, 1, c.attrs.pooled_width, c.shape.width);
  p.ok = boxes.ok;
  p.batch = boxes.batch;
  const xla::XlaOp rows = c.PerRow(xla::Sub(p.h.hi, p.h.lo));
  const xla::XlaOp columns = c.PerColumn(xla::Sub(p.w.hi, p.w.lo));
  p.empty = xla::Or(xla::Not(c.PerBox(p.ok)),
                    xla::Or(xla::Le(rows, c.I(0)), xla::Le(columns, c.I(0))));
  p.area = xla::ConvertElementType(
      xla::Mul(xla::ConvertElementType(rows, xla::S64),
               xla::ConvertElementType(columns, xla::S64)),
      c.acc);
  return p;
}

// The loop bounds: the most rows and columns of any bin.
xla::XlaOp MaxExtent(const Call& c, const PoolRanges& r, xla::XlaOp ok,
                     int64_t bins) {
  return MaskedMax(c, xla::Sub(r.hi, r.lo),
                   xla::BroadcastInDim(ok, {c.shape.num_rois, bins}, {0}));
}

// SampleLoop over the pixels of the bins of `p`, with the boxes carried in
// the loop state: body(cb, pixels, index, values) returns the new `values`.
template <typename Body>
StatusOr<std::vector<xla::XlaOp>> PixelLoop(const Call& c, const PoolBoxes& p,
                                            std::vector<xla::XlaOp> values,
                                            const char* name, Body body) {
  return CarryBoxes(
      c, MaxExtent(c, p.h, p.ok, c.attrs.pooled_height),
      MaxExtent(c, p.w, p.ok, c.attrs.pooled_width),
      {p.h.lo, p.h.hi, p.w.lo, p.w.hi, p.ok, p.batch}, std::move(values), name,
      [&](const Call& cb, const std::vector<xla::XlaOp>& b, xla::XlaOp dy,
          xla::XlaOp dx, std::vector<xla::XlaOp> v) {
        return body(cb, BinPixels(cb, b, dy, dx), MakeBinIndex(cb, b[5]),
                    std::move(v));
      });
}

class RoiPoolOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    OP_REQUIRES_OK(context, MakeCall(context, attrs_, context->InputShape(0),
                                     "features", &c));
    if (custom_call_.Compile(context, roi::RoiOpRole::kForward, attrs_,
                             c.shape)) {
      return;
    }
    SetTypes(context->input_xla_type(0), &c);
    const bool ps = attrs_.position_sensitive();
    if (c.empty()) {
      context->SetOutput(
          0, BoxRows(c, ToDataFormat(c, c.Zeros(c.type, c.pooled_dims()))));
      if (!ps) {
        context->SetOutput(
            1, BoxRows(c, ToDataFormat(
                              c, xla::Broadcast(c.I(-1), c.pooled_dims()))));
      }
      return;
    }
    const xla::XlaOp features = xla::Reshape(
        xla::ConvertElementType(ToChannelsLast(c, Padded(context, 0)), c.acc),
        c.view_dims());
    const PoolBoxes p = MakePoolBoxes(c, Padded(context, 1));
    const xla::XlaOp empty = c.PerBin(p.empty);
    // RoiPool: the running maximum starts at -FLT_MAX (0 for an empty bin)
    // and a strictly greater value replaces it. PsRoiPool: a sum.
    const xla::XlaOp init =
        ps ? c.Zeros(c.acc, c.pooled_dims())
           : xla::Select(empty, c.Zeros(c.acc, c.pooled_dims()),
                         xla::Broadcast(c.A(-FLT_MAX), c.pooled_dims()));
    const int64_t width = c.shape.width;
    auto result = PixelLoop(
        c, p, {init, xla::Broadcast(c.I(-1), c.pooled_dims()), features},
        ps ? "ps_roi_pool_pixels" : "roi_pool_pixels",
        [&](const Call& cb, const Pixels& px, const BinIndex& bin,
            std::vector<xla::XlaOp> v) {
          const xla::XlaOp value =
              GatherBins(cb, v[2], {bin.batch, px.y, px.x, bin.gy, bin.gx});
          const xla::XlaOp valid = cb.PerBin(px.valid);
          if (ps) {
            v[0] = xla::Select(valid, xla::Add(v[0], value), v[0]);
          } else {
            const xla::XlaOp better = xla::And(valid, xla::Gt(value, v[0]));
            const xla::XlaOp index =
                cb.PerBin(xla::Add(xla::Mul(px.y, cb.I(width)), px.x));
            v[0] = xla::Select(better, value, v[0]);
            v[1] = xla::Select(better, index, v[1]);
          }
          return v;
        });
    OP_REQUIRES_OK(context, result.status());
    xla::XlaOp pooled = (*result)[0];
    if (ps) {
      pooled = xla::Select(empty, xla::ZerosLike(pooled),
                           Divide(pooled, c.PerBin(p.area)));
    }
    context->SetOutput(
        0,
        BoxRows(c, ToDataFormat(c, xla::ConvertElementType(pooled, c.type))));
    if (!ps) context->SetOutput(1, BoxRows(c, ToDataFormat(c, (*result)[1])));
  }
};

class RoiPoolGradOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    TensorShape features_shape;
    OP_REQUIRES_OK(context,
                   RoiAlignGradOp::ReadFeaturesShape(context, &features_shape));
    OP_REQUIRES_OK(context, MakeCall(context, attrs_, features_shape,
                                     "features_shape", &c));
    const TensorShape grads_shape = context->InputShape(0);
    OP_REQUIRES_OK(context, roi::CheckPooledGradShape(grads_shape, c.shape,
                                                      attrs_, "grads"));
    const bool ps = attrs_.position_sensitive();
    if (!ps) {
      OP_REQUIRES(context, context->InputShape(2) == grads_shape,
                  errors::InvalidArgument(
                      "argmax must have shape ", grads_shape.DebugString(),
                      ", got ", context->InputShape(2).DebugString()));
    }
    if (custom_call_.Compile(context, roi::RoiOpRole::kGrad, attrs_, c.shape)) {
      return;
    }
    SetTypes(context->input_xla_type(0), &c);
    if (c.empty()) {
      context->SetOutput(0, c.Zeros(c.type, features_shape.dim_sizes()));
      return;
    }
    const PoolBoxes p = MakePoolBoxes(c, Padded(context, 1));
    xla::XlaOp grads =
        xla::ConvertElementType(ToChannelsLast(c, Padded(context, 0)), c.acc);
    xla::XlaOp grad =
        ps ? PsGrad(c, p, grads)
           : Grad(c, p, grads, ToChannelsLast(c, Padded(context, 2)));
    grad = xla::Reshape(
        xla::ConvertElementType(grad, c.type),
        {c.shape.batch, c.shape.height, c.shape.width, c.shape.channels});
    context->SetOutput(0, ToDataFormat(c, grad));
  }

 private:
  // RoiPoolGrad: grad[b, argmax / W, argmax % W, c] += grads, one scalar per
  // output element, in output order; entries that are not a pixel (-1 for
  // empty bins) or belong to a box that is not ok are skipped.
  static xla::XlaOp Grad(const Call& c, const PoolBoxes& p, xla::XlaOp grads,
                         xla::XlaOp argmax) {
    const std::vector<int64_t> dims = c.pooled_dims();
    const int64_t width = c.shape.width;
    const xla::XlaOp valid =
        xla::And(xla::BroadcastInDim(p.ok, dims, {0}),
                 xla::And(xla::Ge(argmax, c.I(0)),
                          xla::Lt(argmax, c.I(c.shape.height * width))));
    const xla::XlaOp y = xla::Select(valid, xla::Div(argmax, c.I(width)),
                                     xla::Broadcast(c.I(c.shape.height), dims));
    const xla::XlaOp x = xla::Rem(xla::Max(argmax, c.I(0)), c.I(width));
    std::vector<xla::XlaOp> parts;
    for (const xla::XlaOp& i : {xla::BroadcastInDim(p.batch, dims, {0}), y, x,
                                c.Iota(xla::S32, dims, 3)}) {
      std::vector<int64_t> with_vector = dims;
      with_vector.push_back(1);
      parts.push_back(xla::Reshape(i, with_vector));
    }
    xla::ScatterDimensionNumbers numbers;
    for (int64_t d = 0; d < 4; ++d) {
      numbers.add_inserted_window_dims(d);
      numbers.add_scatter_dims_to_operand_dims(d);
    }
    numbers.set_index_vector_dim(4);
    const std::vector<int64_t> grad_dims = {c.shape.batch, c.shape.height,
                                            c.shape.width, c.shape.channels};
    return xla::Scatter(c.Zeros(c.acc, grad_dims),
                        xla::ConcatInDim(c.b, parts, 4),
                        xla::Select(valid, grads, xla::ZerosLike(grads)),
                        xla::CreateScalarAddComputation(c.acc, c.b), numbers);
  }

  // PsRoiPoolGrad: each pixel of a bin gets grads / area, pixel by pixel.
  static xla::XlaOp PsGrad(const Call& c, const PoolBoxes& p,
                           xla::XlaOp grads) {
    const xla::XlaOp g = xla::Select(c.PerBin(p.empty), xla::ZerosLike(grads),
                                     Divide(grads, c.PerBin(p.area)));
    auto result = PixelLoop(
        c, p, {c.Zeros(c.acc, c.view_dims()), g}, "ps_roi_pool_grad_pixels",
        [&](const Call& cb, const Pixels& px, const BinIndex& bin,
            std::vector<xla::XlaOp> v) {
          const xla::XlaOp y = xla::Select(
              px.valid, px.y,
              xla::Broadcast(cb.I(cb.shape.height), cb.bins_dims()));
          const xla::XlaOp update =
              xla::Select(cb.PerBin(px.valid), v[1], xla::ZerosLike(v[1]));
          v[0] = ScatterAddBins(cb, v[0], {bin.batch, y, px.x, bin.gy, bin.gx},
                                update);
          return v;
        });
    if (!result.ok()) {
      c.b->ReportError(result.status());
      return c.Zeros(c.acc, c.view_dims());
    }
    return (*result)[0];
  }
};

// RoiAlignGradBoxes and PsRoiAlignGradBoxes: per sample, the slopes of the
// bilinear value along y and x, summed over the channels against the incoming
// gradient, times how the sample moves with each coordinate
// (roi_align_op.h's AddSlopes and SampleMotion), summed over samples and bins.
class RoiAlignGradBoxesOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    OP_REQUIRES_OK(context, MakeCall(context, attrs_, context->InputShape(1),
                                     "features", &c, /*rois_input=*/2));
    OP_REQUIRES_OK(context,
                   roi::CheckPooledGradShape(context->InputShape(0), c.shape,
                                             attrs_, "grads"));
    if (custom_call_.Compile(context, roi::RoiOpRole::kGradBoxes, attrs_,
                             c.shape)) {
      return;
    }
    SetTypes(context->input_xla_type(1), &c);
    const int64_t k = c.shape.num_rois;
    if (c.empty()) {
      context->SetOutput(0, BoxRows(c, c.Zeros(c.boxes, {k, 5})));
      return;
    }
    const xla::XlaOp features = xla::Reshape(
        xla::ConvertElementType(ToChannelsLast(c, Padded(context, 1)), c.acc),
        c.view_dims());
    const AlignBoxes box = MakeAlignBoxes(c, ReadBoxes(c, Padded(context, 2)));
    const xla::XlaOp grads = Divide(
        xla::ConvertElementType(ToChannelsLast(c, Padded(context, 0)), c.acc),
        xla::BroadcastInDim(box.count, c.pooled_dims(), {0}));
    const xla::XlaOp zeros = c.Zeros(c.acc, c.bins_dims());
    // Loop values: the sums for x1, y1, x2, y2 per bin, features, grads.
    auto result = AlignSampleLoop(
        c, box, {zeros, zeros, zeros, zeros, features, grads},
        "roi_align_box_samples",
        [&](const Call& cb, const std::vector<xla::XlaOp>& b, const Samples& s,
            const BinIndex& bin, std::vector<xla::XlaOp> v) {
          std::vector<xla::XlaOp> corner;
          for (int j = 0; j < 4; ++j) {
            corner.push_back(GatherBins(
                cb, v[4], {bin.batch, s.y[j], s.x[j], bin.gy, bin.gx}));
          }
          const auto slope = [&](xla::XlaOp l, xla::XlaOp a0, xla::XlaOp a1,
                                 xla::XlaOp b0, xla::XlaOp b1) {
            // sum_c g * ((1 - l) * (a1 - a0) + l * (b1 - b0))
            const xla::XlaOp wl = cb.PerBin(l);
            const xla::XlaOp terms =
                xla::Add(xla::Mul(xla::Sub(cb.A(1), wl), xla::Sub(a1, a0)),
                         xla::Mul(wl, xla::Sub(b1, b0)));
            return xla::Reduce(xla::Mul(v[5], terms), cb.A(0),
                               xla::CreateScalarAddComputation(cb.acc, cb.b),
                               {3});
          };
          const xla::XlaOp dy =
              slope(s.lx, corner[0], corner[2], corner[1], corner[3]);
          const xla::XlaOp dx =
              slope(s.ly, corner[0], corner[1], corner[2], corner[3]);
          const Motion my = SampleMotionAlong(cb, b[kGridH], b[kFlooredH], s.iy,
                                              cb.attrs.pooled_height, 1);
          const Motion mx = SampleMotionAlong(cb, b[kGridW], b[kFlooredW], s.ix,
                                              cb.attrs.pooled_width, 2);
          const xla::XlaOp use_y = xla::And(s.valid, s.y_moves);
          const xla::XlaOp use_x = xla::And(s.valid, s.x_moves);
          const auto add = [&](xla::XlaOp sum, xla::XlaOp use, xla::XlaOp d,
                               xla::XlaOp motion) {
            return xla::Select(use, xla::Add(sum, xla::Mul(d, motion)), sum);
          };
          v[0] = add(v[0], use_x, dx, mx.near);
          v[1] = add(v[1], use_y, dy, my.near);
          v[2] = add(v[2], use_x, dx, mx.far);
          v[3] = add(v[3], use_y, dy, my.far);
          return v;
        });
    OP_REQUIRES_OK(context, result.status());
    std::vector<xla::XlaOp> columns = {c.Zeros(c.boxes, {k, 1})};
    for (int j = 0; j < 4; ++j) {
      const xla::XlaOp sum =
          xla::Reduce((*result)[j], c.A(0),
                      xla::CreateScalarAddComputation(c.acc, c.b), {1, 2});
      columns.push_back(
          xla::Reshape(xla::ConvertElementType(sum, c.boxes), {k, 1}));
    }
    context->SetOutput(0, BoxRows(c, xla::ConcatInDim(c.b, columns, 1)));
  }

 private:
  // SampleMotion for sample i[k, bin] of every bin along one axis ([K, PH]
  // or [K, PW], broadcast to the bins along `bins_dim`): how it moves with
  // the box's near and far coordinate.
  struct Motion {
    xla::XlaOp near, far;
  };
  static Motion SampleMotionAlong(const Call& c, xla::XlaOp grid,
                                  xla::XlaOp floored, xla::XlaOp i,
                                  int64_t bins, int64_t bins_dim) {
    const int64_t k = c.shape.num_rois;
    const std::vector<int64_t> dims = {k, bins};
    const xla::XlaOp scale = c.A(c.attrs.spatial_scale);
    const xla::XlaOp within = Divide(
        xla::Add(xla::ConvertElementType(i, c.acc), c.A(0.5)),
        xla::BroadcastInDim(xla::ConvertElementType(grid, c.acc), dims, {0}));
    const xla::XlaOp t = Divide(xla::Add(c.Iota(c.acc, dims, 1), within),
                                c.A(static_cast<double>(bins)));
    const xla::XlaOp fixed = xla::BroadcastInDim(floored, dims, {0});
    Motion m;
    m.near = xla::Select(fixed, xla::Broadcast(scale, dims),
                         xla::Mul(scale, xla::Sub(c.A(1), t)));
    m.far =
        xla::Select(fixed, xla::Broadcast(c.A(0), dims), xla::Mul(scale, t));
    const std::vector<int64_t> to_bins = {0, bins_dim};
    m.near = xla::BroadcastInDim(m.near, c.bins_dims(), to_bins);
    m.far = xla::BroadcastInDim(m.far, c.bins_dims(), to_bins);
    return m;
  }
};

// One class per op, as the registration needs a constructor of one argument.
template <typename Op, RoiKind kKind>
class Lowering : public Op {
 public:
  explicit Lowering(OpKernelConstruction* context) : Op(context, kKind) {}
};

using RoiAlignLowering = Lowering<RoiAlignOp, RoiKind::kAlign>;
using PsRoiAlignLowering = Lowering<RoiAlignOp, RoiKind::kPsAlign>;
using RoiPoolLowering = Lowering<RoiPoolOp, RoiKind::kPool>;
using PsRoiPoolLowering = Lowering<RoiPoolOp, RoiKind::kPsPool>;
using RoiAlignGradLowering = Lowering<RoiAlignGradOp, RoiKind::kAlign>;
using PsRoiAlignGradLowering = Lowering<RoiAlignGradOp, RoiKind::kPsAlign>;
using RoiPoolGradLowering = Lowering<RoiPoolGradOp, RoiKind::kPool>;
using PsRoiPoolGradLowering = Lowering<RoiPoolGradOp, RoiKind::kPsPool>;
using RoiAlignGradBoxesLowering =
    Lowering<RoiAlignGradBoxesOp, RoiKind::kAlign>;
using PsRoiAlignGradBoxesLowering =
    Lowering<RoiAlignGradBoxesOp, RoiKind::kPsAlign>;

TFCO_REGISTER_XLA_OP("CustomOps>RoiAlign", RoiAlignLowering);
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiAlign", PsRoiAlignLowering);
TFCO_REGISTER_XLA_OP("CustomOps>RoiPool", RoiPoolLowering);
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiPool", PsRoiPoolLowering);
TFCO_REGISTER_XLA_OP("CustomOps>RoiAlignGrad", RoiAlignGradLowering,
                     .CompileTimeConstantInput("features_shape"));
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiAlignGrad", PsRoiAlignGradLowering,
                     .CompileTimeConstantInput("features_shape"));
TFCO_REGISTER_XLA_OP("CustomOps>RoiPoolGrad", RoiPoolGradLowering,
                     .CompileTimeConstantInput("features_shape"));
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiPoolGrad", PsRoiPoolGradLowering,
                     .CompileTimeConstantInput("features_shape"));
TFCO_REGISTER_XLA_OP("CustomOps>RoiAlignGradBoxes", RoiAlignGradBoxesLowering);
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiAlignGradBoxes",
                     PsRoiAlignGradBoxesLowering);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
