// XLA lowerings of RoiPool and PsRoiPool and their gradients, as HLO
// (roi_lowering_helpers.h says how), unless a custom call serves them
// (roi_custom_call.h).

#include <cfloat>
#include <cstdint>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_lowering_helpers.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"
#include "tensorflow_customops/compiler/tf2xla/xla_op_registration.h"
#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace hlo {
namespace {

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
    if (CustomCallLowers(context, roi::RoiOpRole::kForward, 0, &c)) return;
    const bool ps = attrs_.position_sensitive();
    if (c.empty()) {
      context->SetOutput(0, PooledOutput(c, c.Zeros(c.type, c.pooled_dims())));
      if (!ps) {
        context->SetOutput(
            1, PooledOutput(c, xla::Broadcast(c.I(-1), c.pooled_dims())));
      }
      return;
    }
    const xla::XlaOp features =
        xla::Reshape(ReadChannelsLast(context, c, 0), c.view_dims());
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
        0, PooledOutput(c, xla::ConvertElementType(pooled, c.type)));
    if (!ps) context->SetOutput(1, PooledOutput(c, (*result)[1]));
  }
};

class RoiPoolGradOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    TensorShape features_shape;
    OP_REQUIRES_OK(context, MakeGradCall(context, attrs_, &features_shape, &c));
    const bool ps = attrs_.position_sensitive();
    if (!ps) {
      OP_REQUIRES_OK(context,
                     roi::CheckPooledGradShape(context->InputShape(2), c.shape,
                                               attrs_, "argmax"));
    }
    if (CustomCallLowers(context, roi::RoiOpRole::kGrad, 0, &c)) return;
    if (c.empty()) {
      context->SetOutput(0, c.Zeros(c.type, features_shape.dim_sizes()));
      return;
    }
    const PoolBoxes p = MakePoolBoxes(c, Padded(context, 1));
    const xla::XlaOp grads = ReadChannelsLast(context, c, 0);
    context->SetOutput(
        0,
        FeaturesGradOutput(
            c, ps ? PsGrad(c, p, grads)
                  : Grad(c, p, grads, ToChannelsLast(c, Padded(context, 2)))));
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

using RoiPoolLowering = Lowering<RoiPoolOp, RoiKind::kPool>;
using PsRoiPoolLowering = Lowering<RoiPoolOp, RoiKind::kPsPool>;
using RoiPoolGradLowering = Lowering<RoiPoolGradOp, RoiKind::kPool>;
using PsRoiPoolGradLowering = Lowering<RoiPoolGradOp, RoiKind::kPsPool>;

TFCO_REGISTER_XLA_OP("CustomOps>RoiPool", RoiPoolLowering);
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiPool", PsRoiPoolLowering);
TFCO_REGISTER_XLA_OP("CustomOps>RoiPoolGrad", RoiPoolGradLowering,
                     .CompileTimeConstantInput("features_shape"));
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiPoolGrad", PsRoiPoolGradLowering,
                     .CompileTimeConstantInput("features_shape"));

}  // namespace
}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
