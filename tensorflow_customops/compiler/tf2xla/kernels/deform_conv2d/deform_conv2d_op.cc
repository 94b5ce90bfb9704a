// XLA lowerings of CustomOps>DeformableConv2d and its gradient op, in HLO:
// the four bilinear corners of every sample gathered from the input (one
// row of an offset group's channels each), weighted and masked into the
// columns, and a DotGeneral with the filter per group; the gradient op adds
// the column gradient onto the corners with scatter-adds and reduces it
// against the corners for the offset and mask gradients. Sampling follows
// deform_conv2d::Sample (the kernels'): NaN coordinates give NaN, corners off
// the map read a zero row. Computed in float32 (float64 for double), as the
// kernels; sums run in XLA's order (the registry entry's xla_tolerance).

#include <array>
#include <limits>
#include <numeric>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/deform_conv2d/deform_conv2d_custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/static_shapes.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_shape.h"

namespace tensorflow {
namespace customops {
namespace {

namespace dc = deform_conv2d;

// One call: its builder, types and geometry, and the dims of the sample
// arrays, [N, Ho, Wo, offset_groups, kh * kw] (+ [channels per offset
// group] for values).
struct Call {
  xla::XlaBuilder* b;
  xla::PrimitiveType type, acc;
  dc::Attrs attrs;
  dc::Geometry g;
  int64_t taps, cog, cg, og, rows;

  std::vector<int64_t> dims5() const {
    return {g.n, g.ho, g.wo, g.offset_groups, taps};
  }
  std::vector<int64_t> dims6() const {
    return {g.n, g.ho, g.wo, g.offset_groups, taps, cog};
  }
  xla::XlaOp A(double v) const { return xla::ConstantR0WithType(b, acc, v); }
  xla::XlaOp Full(double v, const std::vector<int64_t>& dims) const {
    return xla::Broadcast(A(v), dims);
  }
  // A [dims5] array broadcast along the channels.
  xla::XlaOp Wide(xla::XlaOp a) const {
    return xla::BroadcastInDim(a, dims6(), {0, 1, 2, 3, 4});
  }
  xla::XlaOp Iota5(xla::PrimitiveType t, int64_t dim) const {
    return xla::Iota(b, xla::ShapeUtil::MakeShape(t, dims5()), dim);
  }
  // A rank-4 input in the attrs' layout as NHWC, in the accumulation type.
  xla::XlaOp Nhwc(xla::XlaOp op) const {
    op = xla::ConvertElementType(op, acc);
    return attrs.nchw ? xla::Transpose(op, {0, 2, 3, 1}) : op;
  }
  // An NHWC result back in the attrs' layout and the op's type.
  xla::XlaOp Out(xla::XlaOp op) const {
    op = xla::ConvertElementType(op, type);
    return attrs.nchw ? xla::Transpose(op, {0, 3, 1, 2}) : op;
  }
};

Status Dims4(const TensorShape& shape, const char* name,
             std::array<int64_t, 4>* dims) {
  if (shape.dims() != 4) {
    return errors::InvalidArgument("DeformableConv2d: ", name,
                                   " must have rank 4, got shape ",
                                   shape.DebugString());
  }
  for (int d = 0; d < 4; ++d) (*dims)[d] = shape.dim_size(d);
  return OkStatus();
}

// Checks the inputs with the kernels' messages and fills `c`.
Status Prepare(XlaOpKernelContext* context, const dc::Attrs& attrs, Call* c) {
  // Both lowerings size everything from the bounds of dynamic dimensions.
  std::vector<int> inputs(context->num_inputs());
  std::iota(inputs.begin(), inputs.end(), 0);
  TF_RETURN_IF_ERROR(CheckStaticDimensions(context, inputs));
  std::array<int64_t, 4> input, filter, offset, mask{-1, -1, -1, -1};
  TF_RETURN_IF_ERROR(Dims4(context->InputShape(0), "input", &input));
  TF_RETURN_IF_ERROR(Dims4(context->InputShape(1), "filter", &filter));
  TF_RETURN_IF_ERROR(Dims4(context->InputShape(2), "offset", &offset));
  if (attrs.use_mask) {
    TF_RETURN_IF_ERROR(Dims4(context->InputShape(3), "mask", &mask));
  } else if (context->InputShape(3).num_elements() != 0) {
    return errors::InvalidArgument(
        "DeformableConv2d: mask must be empty when use_mask is false, got ",
        context->InputShape(3).DebugString());
  }
  c->b = context->builder();
  c->type = context->input_xla_type(0);
  c->acc = c->type == xla::F64 ? xla::F64 : xla::F32;
  c->attrs = attrs;
  TF_RETURN_IF_ERROR(
      dc::GetGeometry(attrs, input, filter, offset, mask, &c->g));
  c->taps = c->g.kh * c->g.kw;
  c->cog = c->g.c / c->g.offset_groups;
  c->cg = c->g.c / c->g.groups;
  c->og = c->g.o / c->g.groups;
  c->rows = c->g.n * c->g.h * c->g.w * c->g.offset_groups;
  return OkStatus();
}

// Every sample of the call, as [dims5] arrays.
struct Samples {
  xla::XlaOp nan, near, inside, m, ly, lx;
  // Row of each corner in the input viewed as [rows + 1, cog] (image, y, x,
  // offset group); row `rows`, all zeros, for a corner off the map.
  std::array<xla::XlaOp, 4> row, weight, valid;
};

Samples MakeSamples(const Call& c, xla::XlaOp offset, xla::XlaOp mask) {
  const dc::Attrs& a = c.attrs;
  const dc::Geometry& g = c.g;
  const std::vector<int64_t> dims5 = c.dims5();
  auto s64 = [&](int64_t v) { return xla::ConstantR0<int64_t>(c.b, v); };
  // offset [N, Ho, Wo, G * K * 2]: (dy, dx) of tap k of group g at
  // 2 * (g * K + k).
  const xla::XlaOp pairs =
      xla::Reshape(offset, {g.n, g.ho, g.wo, g.offset_groups, c.taps, 2});
  const xla::XlaOp dy = xla::Reshape(xla::SliceInDim(pairs, 0, 1, 1, 5), dims5);
  const xla::XlaOp dx = xla::Reshape(xla::SliceInDim(pairs, 1, 2, 1, 5), dims5);
  const xla::XlaOp tap = c.Iota5(xla::S64, 4);
  const xla::XlaOp base_y = xla::Add(
      xla::Sub(xla::Mul(c.Iota5(xla::S64, 1), s64(a.stride_h)), s64(g.pad_top)),
      xla::Mul(xla::Div(tap, s64(g.kw)), s64(a.dilation_h)));
  const xla::XlaOp base_x =
      xla::Add(xla::Sub(xla::Mul(c.Iota5(xla::S64, 2), s64(a.stride_w)),
                        s64(g.pad_left)),
               xla::Mul(xla::Rem(tap, s64(g.kw)), s64(a.dilation_w)));
  const xla::XlaOp y = xla::Add(xla::ConvertElementType(base_y, c.acc), dy);
  const xla::XlaOp x = xla::Add(xla::ConvertElementType(base_x, c.acc), dx);
  Samples s;
  s.nan = xla::Or(xla::Ne(y, y), xla::Ne(x, x));
  s.near = xla::And(xla::And(xla::Ge(y, c.A(-1)), xla::Lt(y, c.A(g.h))),
                    xla::And(xla::Ge(x, c.A(-1)), xla::Lt(x, c.A(g.w))));
  s.inside =
      xla::And(s.near, xla::And(xla::Gt(y, c.A(-1)), xla::Gt(x, c.A(-1))));
  const xla::XlaOp zero = c.Full(0, dims5);
  const xla::XlaOp fy = xla::Floor(xla::Select(s.near, y, zero));
  const xla::XlaOp fx = xla::Floor(xla::Select(s.near, x, zero));
  s.ly = xla::Sub(xla::Select(s.near, y, zero), fy);
  s.lx = xla::Sub(xla::Select(s.near, x, zero), fx);
  const xla::XlaOp y0 = xla::ConvertElementType(fy, xla::S64);
  const xla::XlaOp x0 = xla::ConvertElementType(fx, xla::S64);
  const xla::XlaOp hy = xla::Sub(c.A(1), s.ly), hx = xla::Sub(c.A(1), s.lx);
  const xla::XlaOp image = c.Iota5(xla::S64, 0);
  const xla::XlaOp group = c.Iota5(xla::S64, 3);
  const xla::XlaOp off_map = xla::Broadcast(s64(c.rows), dims5);
  for (int q = 0; q < 4; ++q) {
    const xla::XlaOp yy = xla::Add(y0, s64(q / 2));
    const xla::XlaOp xx = xla::Add(x0, s64(q % 2));
    s.valid[q] = xla::And(
        s.near, xla::And(xla::And(xla::Ge(yy, s64(0)), xla::Lt(yy, s64(g.h))),
                         xla::And(xla::Ge(xx, s64(0)), xla::Lt(xx, s64(g.w)))));
    const xla::XlaOp row = xla::Add(
        xla::Mul(xla::Add(xla::Mul(xla::Add(xla::Mul(image, s64(g.h)), yy),
                                   s64(g.w)),
                          xx),
                 s64(g.offset_groups)),
        group);
    s.row[q] = xla::Select(s.valid[q], row, off_map);
    s.weight[q] = xla::Mul(q / 2 ? s.ly : hy, q % 2 ? s.lx : hx);
  }
  s.m = a.use_mask ? xla::Reshape(mask, dims5) : c.Full(1, dims5);
  return s;
}

xla::GatherDimensionNumbers RowGather() {
  xla::GatherDimensionNumbers dims;
  dims.add_offset_dims(5);
  dims.add_collapsed_slice_dims(0);
  dims.add_start_index_map(0);
  dims.set_index_vector_dim(5);
  return dims;
}

xla::ScatterDimensionNumbers RowScatter() {
  xla::ScatterDimensionNumbers dims;
  dims.add_update_window_dims(5);
  dims.add_inserted_window_dims(0);
  dims.add_scatter_dims_to_operand_dims(0);
  dims.set_index_vector_dim(5);
  return dims;
}

// The input as [rows + 1, cog] with a zero last row, and the four corners'
// values of every sample, [dims6] (0 off the map).
std::array<xla::XlaOp, 4> Corners(const Call& c, const Samples& s,
                                  xla::XlaOp input) {
  const xla::XlaOp rows = xla::ConcatInDim(
      c.b, {xla::Reshape(input, {c.rows, c.cog}), c.Full(0, {1, c.cog})}, 0);
  std::array<xla::XlaOp, 4> v;
  for (int q = 0; q < 4; ++q) {
    v[q] = xla::Gather(rows,
                       xla::Reshape(s.row[q], {c.g.n, c.g.ho, c.g.wo,
                                               c.g.offset_groups, c.taps, 1}),
                       RowGather(), {1, c.cog});
  }
  return v;
}

// The bilinear sums of the corners, [dims6], in torchvision's order.
xla::XlaOp Values(const Call& c, const Samples& s,
                  const std::array<xla::XlaOp, 4>& v) {
  xla::XlaOp sum = xla::Mul(c.Wide(s.weight[0]), v[0]);
  for (int q = 1; q < 4; ++q) {
    sum = xla::Add(sum, xla::Mul(c.Wide(s.weight[q]), v[q]));
  }
  return sum;
}

xla::XlaOp Nan(const Call& c, const std::vector<int64_t>& dims) {
  return c.Full(std::numeric_limits<double>::quiet_NaN(), dims);
}

// The columns, [P, K, groups, C / groups]: m * value, 0 off the map, NaN for
// a NaN coordinate.
xla::XlaOp Columns(const Call& c, const Samples& s, xla::XlaOp values) {
  const std::vector<int64_t> dims6 = c.dims6();
  xla::XlaOp col = xla::Mul(
      c.Wide(s.m), xla::Select(c.Wide(s.inside), values, c.Full(0, dims6)));
  col = xla::Select(c.Wide(s.nan), Nan(c, dims6), col);
  col = xla::Transpose(col, {0, 1, 2, 4, 3, 5});  // [N, Ho, Wo, K, G, cog]
  return xla::Reshape(col, {c.g.n * c.g.ho * c.g.wo, c.taps, c.g.groups, c.cg});
}

// The filter as [K, C / groups, groups, O / groups].
xla::XlaOp Filter(const Call& c, xla::XlaOp filter) {
  return xla::Reshape(xla::ConvertElementType(filter, c.acc),
                      {c.taps, c.cg, c.g.groups, c.og});
}

xla::XlaOp Dot(const Call& c, xla::XlaOp lhs, xla::XlaOp rhs,
               std::vector<int64_t> lhs_batch, std::vector<int64_t> rhs_batch,
               std::vector<int64_t> lhs_contract,
               std::vector<int64_t> rhs_contract) {
  xla::DotDimensionNumbers dims;
  for (int64_t d : lhs_batch) dims.add_lhs_batch_dimensions(d);
  for (int64_t d : rhs_batch) dims.add_rhs_batch_dimensions(d);
  for (int64_t d : lhs_contract) dims.add_lhs_contracting_dimensions(d);
  for (int64_t d : rhs_contract) dims.add_rhs_contracting_dimensions(d);
  return xla::DotGeneral(lhs, rhs, dims, /*precision_config=*/nullptr, c.acc);
}

// Compiles the call `c` as a custom call where one applies
// (deformable_conv2d_custom_call.h); true if it did, or if the call is too
// large for the portable kernels (the error is set).
bool CompiledAsCustomCall(XlaOpKernelContext* context, const Call& c,
                          const dc::DeformConvCustomCall& custom_call,
                          bool grad) {
  TfcoDeformConv2dArgs args;
  const Status status = dc::CoreArgs(c.attrs, c.g, &args);
  if (!status.ok()) {
    context->SetStatus(status);
    return true;
  }
  return custom_call.Compile(context, grad, args, dc::OutputDims(c.attrs, c.g));
}

class DeformableConv2dXlaOp : public XlaOpKernel {
 public:
  explicit DeformableConv2dXlaOp(OpKernelConstruction* context)
      : XlaOpKernel(context), custom_call_(context) {
    OP_REQUIRES_OK(context, dc::GetAttrs(context, &attrs_));
  }

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    OP_REQUIRES_OK(context, Prepare(context, attrs_, &c));
    if (CompiledAsCustomCall(context, c, custom_call_, /*grad=*/false)) return;
    const Samples s =
        MakeSamples(c, c.Nhwc(context->Input(2)),
                    attrs_.use_mask ? c.Nhwc(context->Input(3)) : xla::XlaOp());
    const xla::XlaOp col =
        Columns(c, s, Values(c, s, Corners(c, s, c.Nhwc(context->Input(0)))));
    // [groups, P, O / groups]
    const xla::XlaOp out =
        Dot(c, col, Filter(c, context->Input(1)), {2}, {2}, {1, 3}, {0, 1});
    context->SetOutput(0, c.Out(xla::Reshape(xla::Transpose(out, {1, 0, 2}),
                                             {c.g.n, c.g.ho, c.g.wo, c.g.o})));
  }

 private:
  dc::Attrs attrs_;
  dc::DeformConvCustomCall custom_call_;
};

class DeformableConv2dGradXlaOp : public XlaOpKernel {
 public:
  explicit DeformableConv2dGradXlaOp(OpKernelConstruction* context)
      : XlaOpKernel(context), custom_call_(context) {
    OP_REQUIRES_OK(context, dc::GetAttrs(context, &attrs_));
  }

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    OP_REQUIRES_OK(context, Prepare(context, attrs_, &c));
    const dc::Geometry& g = c.g;
    const auto out_dims = dc::OutputDims(attrs_, g);
    const TensorShape& grad_shape = context->InputShape(4);
    OP_REQUIRES(
        context,
        grad_shape.dims() == 4 && grad_shape.dim_size(0) == out_dims[0] &&
            grad_shape.dim_size(1) == out_dims[1] &&
            grad_shape.dim_size(2) == out_dims[2] &&
            grad_shape.dim_size(3) == out_dims[3],
        errors::InvalidArgument(
            "DeformableConv2d: grad_output ", grad_shape.DebugString(),
            " must have the shape of the output, ", dc::Dims(out_dims)));
    if (CompiledAsCustomCall(context, c, custom_call_, /*grad=*/true)) return;
    const std::vector<int64_t> dims5 = c.dims5(), dims6 = c.dims6();
    const Samples s =
        MakeSamples(c, c.Nhwc(context->Input(2)),
                    attrs_.use_mask ? c.Nhwc(context->Input(3)) : xla::XlaOp());
    const std::array<xla::XlaOp, 4> v =
        Corners(c, s, c.Nhwc(context->Input(0)));
    const xla::XlaOp values = Values(c, s, v);
    const xla::XlaOp col = Columns(c, s, values);
    const xla::XlaOp filter = Filter(c, context->Input(1));
    const int64_t pixels = g.n * g.ho * g.wo;
    const xla::XlaOp dy =
        xla::Reshape(c.Nhwc(context->Input(4)), {pixels, g.groups, c.og});

    // Filter: [groups, K, C / groups, O / groups] -> HWIO.
    const xla::XlaOp dfilter = Dot(c, col, dy, {2}, {1}, {0}, {0});
    context->SetOutput(1,
                       xla::ConvertElementType(
                           xla::Reshape(xla::Transpose(dfilter, {1, 2, 0, 3}),
                                        {g.kh, g.kw, c.cg, g.o}),
                           c.type));

    // The columns' gradient, [groups, P, K, C / groups] -> [dims6].
    xla::XlaOp dcol = Dot(c, dy, filter, {1}, {2}, {2}, {3});
    dcol = xla::Reshape(xla::Transpose(dcol, {1, 2, 0, 3}),
                        {g.n, g.ho, g.wo, c.taps, g.offset_groups, c.cog});
    dcol = xla::Transpose(dcol, {0, 1, 2, 4, 3, 5});

    // Input: each corner of weight above 0 gets m * weight * dcol.
    xla::XlaOp dinput = c.Full(0, {c.rows + 1, c.cog});
    for (int q = 0; q < 4; ++q) {
      const xla::XlaOp on = xla::And(
          s.inside, xla::And(s.valid[q], xla::Gt(s.weight[q], c.A(0))));
      const xla::XlaOp factor =
          xla::Select(on, xla::Mul(s.m, s.weight[q]), c.Full(0, dims5));
      dinput = xla::Scatter(
          dinput,
          xla::Reshape(s.row[q], {g.n, g.ho, g.wo, g.offset_groups, c.taps, 1}),
          xla::Mul(dcol, c.Wide(factor)),
          xla::CreateScalarAddComputation(c.acc, c.b), RowScatter());
    }
    dinput = xla::SliceInDim(dinput, 0, c.rows, 1, 0);
    context->SetOutput(0, c.Out(xla::Reshape(dinput, {g.n, g.h, g.w, g.c})));

    // Offset and mask: the slopes and values of the corners against dcol,
    // summed over each offset group's channels.
    auto channel_sum = [&](xla::XlaOp a) {
      return xla::Reduce(xla::Mul(a, dcol), c.A(0),
                         xla::CreateScalarAddComputation(c.acc, c.b), {5});
    };
    const xla::XlaOp wide_ly = c.Wide(s.ly), wide_lx = c.Wide(s.lx);
    const xla::XlaOp slope_y =
        xla::Add(xla::Mul(wide_lx, xla::Sub(v[3], v[1])),
                 xla::Mul(xla::Sub(c.A(1), wide_lx), xla::Sub(v[2], v[0])));
    const xla::XlaOp slope_x =
        xla::Add(xla::Mul(wide_ly, xla::Sub(v[3], v[2])),
                 xla::Mul(xla::Sub(c.A(1), wide_ly), xla::Sub(v[1], v[0])));
    const xla::XlaOp zero = c.Full(0, dims5), nan = Nan(c, dims5);
    auto offset_grad = [&](xla::XlaOp slope) {
      return xla::Select(
          s.nan, nan,
          xla::Mul(s.m, xla::Select(s.near, channel_sum(slope), zero)));
    };
    std::vector<int64_t> pair_dims = dims5;
    pair_dims.push_back(1);
    const xla::XlaOp doffset =
        xla::ConcatInDim(c.b,
                         {xla::Reshape(offset_grad(slope_y), pair_dims),
                          xla::Reshape(offset_grad(slope_x), pair_dims)},
                         5);
    context->SetOutput(
        2, c.Out(xla::Reshape(
               doffset, {g.n, g.ho, g.wo, 2 * g.offset_groups * c.taps})));
    if (attrs_.use_mask) {
      const xla::XlaOp dmask = xla::Select(
          s.nan, nan, xla::Select(s.inside, channel_sum(values), zero));
      context->SetOutput(
          3, c.Out(xla::Reshape(dmask,
                                {g.n, g.ho, g.wo, g.offset_groups * c.taps})));
    } else {
      context->SetOutput(3,
                         xla::Broadcast(xla::ConstantR0WithType(c.b, c.type, 0),
                                        context->InputShape(3).dim_sizes()));
    }
  }

 private:
  dc::Attrs attrs_;
  dc::DeformConvCustomCall custom_call_;
};

TFCO_REGISTER_XLA_OP("CustomOps>DeformableConv2d", DeformableConv2dXlaOp);
TFCO_REGISTER_XLA_OP("CustomOps>DeformableConv2dGrad",
                     DeformableConv2dGradXlaOp);

}  // namespace
}  // namespace customops
}  // namespace tensorflow
