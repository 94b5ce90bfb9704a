// This header exposes the HLO building blocks that the RoI ops' XLA lowerings
// share (roi_align_ops.cc, roi_pool_ops.cc, roi_box_grad_ops.cc): the sizes of
// a call, reading and checking the boxes, gathers and scatters over the
// features, the while loop over a bin's samples or pixels, and the base class
// that reads the attrs. Only the RoI lowerings include it.
//
// Each output bin is a loop over its samples (bilinear kinds) or pixels
// (pooling kinds). A bin's sample count depends on the box, so the loop is an
// HLO while loop over sample t = (iy, ix) that treats every bin at once and
// masks the samples a bin does not have; trip count is the largest range of
// samples that can land on the map (SampleRanges; the largest bin for the
// pooling kinds) of the call, however large the grids. The arithmetic repeats
// the regular kernels' operations in their order (roi_geometry.h,
// roi_sampling.h): the pooling kinds give their bits, the bilinear kinds differ
// where XLA's CPU backend fuses multiply-adds into FMAs, and gradients add the
// same terms in another order.
//
// Data checks that the regular kernels raise (ValidateRois, argmax range)
// cannot raise inside a compiled program: a box that fails them gives zeros
// and no gradient, and an out-of-range argmax entry is skipped. Attr and
// shape checks are the rules the shape functions and the regular kernels
// share (roi_shape.h), at compile time.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_LOWERING_HELPERS_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_LOWERING_HELPERS_H_

#include <cstdint>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/static_shapes.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"
#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace hlo {

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
xla::XlaOp Divide(xla::XlaOp x, xla::XlaOp y);

// The call of `attrs` on features of `features_shape` (named
// `features_name` in errors) and the boxes of input `rois_input`, with the
// regular kernels' shape checks; the types are set by SetTypes.
Status MakeCall(XlaOpKernelContext* context, const RoiAttrs& attrs,
                const TensorShape& features_shape, const char* features_name,
                Call* call, int rois_input = 1);

void SetTypes(xla::PrimitiveType type, Call* call);

// Input i without dynamic dimensions: padded to their bounds.
xla::XlaOp Padded(XlaOpKernelContext* context, int i);

// An output whose rows are the boxes, with their dynamic count.
xla::XlaOp BoxRows(const Call& c, xla::XlaOp x);

// NCHW <-> NHWC for the features and the pooled tensors.
xla::XlaOp ToChannelsLast(const Call& c, xla::XlaOp x);
xla::XlaOp ToDataFormat(const Call& c, xla::XlaOp x);

// Input i (features or a pooled gradient), channels last, in the
// accumulation type.
xla::XlaOp ReadChannelsLast(XlaOpKernelContext* context, const Call& c, int i);

// A pooled [K, PH, PW, C] result, channels last, as an output: in the data
// format, its rows the boxes.
xla::XlaOp PooledOutput(const Call& c, xla::XlaOp pooled);

// The features gradient, channels last in the accumulation type (any shape
// of as many elements), as the output: of the op's type, in its data format.
xla::XlaOp FeaturesGradOutput(const Call& c, xla::XlaOp grad);

// The call of a features-gradient op: its features_shape input and the shape
// checks of its grads input (0).
Status MakeGradCall(XlaOpKernelContext* context, const RoiAttrs& attrs,
                    TensorShape* features_shape, Call* call);

// The boxes, one [K] array per column, with `ok` (which boxes pass the
// regular kernels' ValidateRois) and their batch indices (0 where not ok).
struct Boxes {
  std::vector<xla::XlaOp> column;  // of the boxes' type
  xla::XlaOp ok;
  xla::XlaOp batch;  // int32
};

Boxes ReadBoxes(const Call& c, xla::XlaOp rois);

// The largest of the int32 `values` where `mask` holds, or 0.
xla::XlaOp MaskedMax(const Call& c, xla::XlaOp values, xla::XlaOp mask);

// Gathers features[b, y, x, :, gy, gx] for every bin: [K, PH, PW, C_out].
// `index` holds the arrays (b, y, x, gy, gx), int32 [K, PH, PW] each.
xla::XlaOp GatherBins(const Call& c, xla::XlaOp features,
                      const std::vector<xla::XlaOp>& index);

// grad[b, y, x, :, gy, gx] += updates[k, ph, pw, :] for every bin, in bin
// order; a bin whose y index is out of range (height) is skipped.
xla::XlaOp ScatterAddBins(const Call& c, xla::XlaOp grad,
                          const std::vector<xla::XlaOp>& index,
                          xla::XlaOp updates);

// The (gy, gx) index arrays of the 6-D view.
std::vector<xla::XlaOp> GroupIndex(const Call& c);

// A bin's indices into the 6-D view besides y and x, each [K, PH, PW]: its
// box's batch index and its channel group (gy, gx).
struct BinIndex {
  xla::XlaOp batch, gy, gx;
};

BinIndex MakeBinIndex(const Call& c, xla::XlaOp batch);

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
  // True when the op is done: lowered by the custom call, in `role`, or
  // refused for an input of dynamic shape (the error set on `context`).
  // Otherwise the HLO lowers it, and `c` takes its types from input
  // `typed_input`. Both take bounded-dynamic boxes only.
  bool CustomCallLowers(XlaOpKernelContext* context, roi::RoiOpRole role,
                        int typed_input, Call* c) {
    const bool pool = attrs_.kind == RoiKind::kPool;
    Status status;
    switch (role) {
      case roi::RoiOpRole::kForward:  // features, rois
        status = CheckStaticDimensions(context, {0, 1}, {1});
        break;
      case roi::RoiOpRole::kGrad:  // grads, rois, argmax
        status = pool ? CheckStaticDimensions(context, {0, 1, 2}, {0, 1, 2})
                      : CheckStaticDimensions(context, {0, 1}, {0, 1});
        break;
      case roi::RoiOpRole::kGradBoxes:  // grads, features, rois
        status = CheckStaticDimensions(context, {0, 1, 2}, {0, 2});
        break;
    }
    if (!status.ok()) {
      context->SetStatus(status);
      return true;
    }
    if (custom_call_.Compile(context, role, attrs_, c->shape)) return true;
    SetTypes(context->input_xla_type(typed_input), c);
    return false;
  }

  RoiAttrs attrs_;
  // Where it applies, the lowering instead of the HLO.
  roi::RoiCustomCall custom_call_;
};

// One class per op, as the registration needs a constructor of one argument.
template <typename Op, RoiKind kKind>
class Lowering : public Op {
 public:
  explicit Lowering(OpKernelConstruction* context) : Op(context, kKind) {}
};

}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_KERNELS_ROI_ROI_LOWERING_HELPERS_H_
