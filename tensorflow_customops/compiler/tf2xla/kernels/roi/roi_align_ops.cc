// XLA lowerings of RoiAlign and PsRoiAlign and their feature gradients, as
// HLO (roi_lowering_helpers.h says how), unless a custom call serves them
// (roi_custom_call.h).

#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
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

class RoiAlignOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    OP_REQUIRES_OK(context, MakeCall(context, attrs_, context->InputShape(0),
                                     "features", &c));
    if (CustomCallLowers(context, roi::RoiOpRole::kForward, 0, &c)) return;
    if (c.empty()) {
      context->SetOutput(0, PooledOutput(c, c.Zeros(c.type, c.pooled_dims())));
      return;
    }
    const xla::XlaOp features =
        xla::Reshape(ReadChannelsLast(context, c, 0), c.view_dims());
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
        0, PooledOutput(c, xla::ConvertElementType(Divide((*result)[0], count),
                                                   c.type)));
  }
};

class RoiAlignGradOp : public RoiXlaOpKernel {
 public:
  using RoiXlaOpKernel::RoiXlaOpKernel;

  void Compile(XlaOpKernelContext* context) override {
    Call c;
    TensorShape features_shape;
    OP_REQUIRES_OK(context, MakeGradCall(context, attrs_, &features_shape, &c));
    if (CustomCallLowers(context, roi::RoiOpRole::kGrad, 0, &c)) return;
    if (c.empty()) {
      context->SetOutput(0, c.Zeros(c.type, features_shape.dim_sizes()));
      return;
    }
    const AlignBoxes box = MakeAlignBoxes(c, ReadBoxes(c, Padded(context, 1)));
    const xla::XlaOp grads =
        Divide(ReadChannelsLast(context, c, 0),
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
    context->SetOutput(0, FeaturesGradOutput(c, (*result)[0]));
  }
};

using RoiAlignLowering = Lowering<RoiAlignOp, RoiKind::kAlign>;
using PsRoiAlignLowering = Lowering<RoiAlignOp, RoiKind::kPsAlign>;
using RoiAlignGradLowering = Lowering<RoiAlignGradOp, RoiKind::kAlign>;
using PsRoiAlignGradLowering = Lowering<RoiAlignGradOp, RoiKind::kPsAlign>;

TFCO_REGISTER_XLA_OP("CustomOps>RoiAlign", RoiAlignLowering);
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiAlign", PsRoiAlignLowering);
TFCO_REGISTER_XLA_OP("CustomOps>RoiAlignGrad", RoiAlignGradLowering,
                     .CompileTimeConstantInput("features_shape"));
TFCO_REGISTER_XLA_OP("CustomOps>PsRoiAlignGrad", PsRoiAlignGradLowering,
                     .CompileTimeConstantInput("features_shape"));

}  // namespace
}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
