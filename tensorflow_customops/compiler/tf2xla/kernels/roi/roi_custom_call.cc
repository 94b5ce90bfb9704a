#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call.h"

#if TFCO_XLA_CUSTOM_CALLS

#include <cstdint>
#include <vector>

#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_custom_call_handlers.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace handlers {
namespace {

// The attributes of a call of `a` on `s`, in the handlers' layout.
FfiAttributes Attributes(const RoiAttrs& a, const RoiShape& s) {
  std::vector<int64_t> ints(kNumInts);
  ints[kKind] = static_cast<int64_t>(a.kind);
  ints[kPooledHeight] = a.pooled_height;
  ints[kPooledWidth] = a.pooled_width;
  ints[kSamplingRatio] = a.sampling_ratio;
  ints[kAligned] = a.aligned;
  ints[kNchw] = a.nchw;
  ints[kBatch] = s.batch;
  ints[kHeight] = s.height;
  ints[kWidth] = s.width;
  ints[kChannels] = s.channels;
  ints[kOutChannels] = s.out_channels;
  FfiAttributes attributes;
  attributes.Ints("ints", ints).Float("spatial_scale", a.spatial_scale);
  return attributes;
}

}  // namespace
}  // namespace handlers

RoiCustomCall::RoiCustomCall(OpKernelConstruction* context)
    : choice_(context, /*gpu_handlers=*/true) {}

bool RoiCustomCall::Compile(XlaOpKernelContext* context, RoiOpRole role,
                            const RoiAttrs& attrs,
                            const RoiShape& shape) const {
  if (!choice_.Use()) return false;
  const bool pool = attrs.kind == RoiKind::kPool;
  std::vector<xla::XlaOp> operands;
  int boxes = 0;
  std::vector<CustomCallResult> results;
  const xla::PrimitiveType type =
      context->input_xla_type(role == RoiOpRole::kGradBoxes ? 1 : 0);
  const xla::PrimitiveType boxes_type =
      context->input_xla_type(role == RoiOpRole::kGradBoxes ? 2 : 1);
  std::vector<int64_t> pooled_dims = {shape.num_rois, attrs.pooled_height,
                                      attrs.pooled_width, shape.out_channels};
  if (attrs.nchw) {
    pooled_dims = {shape.num_rois, shape.out_channels, attrs.pooled_height,
                   attrs.pooled_width};
  }
  const char* target = nullptr;
  switch (role) {
    case RoiOpRole::kForward:
      operands = {context->Input(0), context->Input(1)};
      boxes = 1;
      results.push_back({type, pooled_dims, true});
      if (pool) results.push_back({xla::S32, pooled_dims, true});
      target = pool ? handlers::kPoolForward : handlers::kForward;
      break;
    case RoiOpRole::kGrad: {
      operands = {context->Input(0), context->Input(1)};
      if (pool) operands.push_back(context->Input(2));
      boxes = 1;
      std::vector<int64_t> features_dims = {shape.batch, shape.height,
                                            shape.width, shape.channels};
      if (attrs.nchw) {
        features_dims = {shape.batch, shape.channels, shape.height,
                         shape.width};
      }
      results.push_back({type, features_dims, false});
      target = pool ? handlers::kPoolGrad : handlers::kGrad;
      break;
    }
    case RoiOpRole::kGradBoxes:
      operands = {context->Input(0), context->Input(1), context->Input(2)};
      boxes = 2;
      results.push_back({boxes_type, {shape.num_rois, 5}, true});
      target = handlers::kGradBoxes;
      break;
  }
  if (choice_.OnGpu()) {
    // The GPU handlers cannot read a dynamic count (it lives on the device).
    if (HasOtherDynamicDimensions(context, operands, {})) return false;
    // Their scratch: the checked boxes (GpuCall).
    results.push_back({boxes_type, {shape.num_rois, 5}, false});
  }
  const std::vector<xla::XlaOp> outputs =
      EmitCustomCall(context, target, operands, boxes, results,
                     handlers::Attributes(attrs, shape));
  for (int i = 0; i < context->num_outputs(); ++i) {
    context->SetOutput(i, outputs[i]);
  }
  return true;
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#else  // TFCO_XLA_CUSTOM_CALLS

namespace tensorflow {
namespace customops {
namespace roi {

RoiCustomCall::RoiCustomCall(OpKernelConstruction*) {}

bool RoiCustomCall::Compile(XlaOpKernelContext*, RoiOpRole, const RoiAttrs&,
                            const RoiShape&) const {
  return false;
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_CUSTOM_CALLS
