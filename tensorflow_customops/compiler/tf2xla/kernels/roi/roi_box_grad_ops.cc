// XLA lowerings of the box gradients RoiAlignGradBoxes and
// PsRoiAlignGradBoxes, as HLO (roi_lowering_helpers.h says how), unless a
// custom call serves them (roi_custom_call.h).

#include <cstdint>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_align_lowering_helpers.h"
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

// RoiAlignGradBoxes and PsRoiAlignGradBoxes: per sample, the slopes of the
// bilinear value along y and x, summed over the channels against the incoming
// gradient, times how the sample moves with each coordinate
// (roi_sampling.h's AddSlopes and SampleMotion), summed over samples and bins.
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
    if (CustomCallLowers(context, roi::RoiOpRole::kGradBoxes, 1, &c)) return;
    const int64_t k = c.shape.num_rois;
    if (c.empty()) {
      context->SetOutput(0, BoxRows(c, c.Zeros(c.boxes, {k, 5})));
      return;
    }
    const xla::XlaOp features =
        xla::Reshape(ReadChannelsLast(context, c, 1), c.view_dims());
    const AlignBoxes box = MakeAlignBoxes(c, ReadBoxes(c, Padded(context, 2)));
    const xla::XlaOp grads =
        Divide(ReadChannelsLast(context, c, 0),
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

using RoiAlignGradBoxesLowering =
    Lowering<RoiAlignGradBoxesOp, RoiKind::kAlign>;
using PsRoiAlignGradBoxesLowering =
    Lowering<RoiAlignGradBoxesOp, RoiKind::kPsAlign>;

TFCO_REGISTER_XLA_OP("CustomOps>RoiAlignGradBoxes", RoiAlignGradBoxesLowering);
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiAlignGradBoxes",
                     PsRoiAlignGradBoxesLowering);

}  // namespace
}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
