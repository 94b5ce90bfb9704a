#include "tensorflow_customops/compiler/tf2xla/kernels/roi/roi_lowering_helpers.h"

#include <cstdint>
#include <vector>

#include "tensorflow_customops/core/kernels/roi/roi_shape.h"

namespace tensorflow {
namespace customops {
namespace roi {
namespace hlo {

namespace {

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

}  // namespace

xla::XlaOp Divide(xla::XlaOp x, xla::XlaOp y) {
  return xla::Div(x, xla::OptimizationBarrier(y));
}

Status MakeCall(XlaOpKernelContext* context, const RoiAttrs& attrs,
                const TensorShape& features_shape, const char* features_name,
                Call* call, int rois_input) {
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
  return roi::CheckNumElements(roi::PooledDims(call->shape, attrs),
                               "pooled output");
}

xla::XlaOp Padded(XlaOpKernelContext* context, int i) {
  xla::XlaOp x = context->Input(i);
  const xla::Shape shape = *context->builder()->GetShape(x);
  for (int d = 0; d < shape.dimensions_size(); ++d) {
    if (shape.is_dynamic_dimension(d)) x = xla::RemoveDynamicDimension(x, d);
  }
  return x;
}

xla::XlaOp BoxRows(const Call& c, xla::XlaOp x) {
  return c.dynamic_boxes ? xla::SetDimensionSize(x, c.num_boxes, 0) : x;
}

void SetTypes(xla::PrimitiveType type, Call* call) {
  call->type = type;
  call->acc = type == xla::F64 ? xla::F64 : xla::F32;
}

xla::XlaOp ToChannelsLast(const Call& c, xla::XlaOp x) {
  return c.attrs.nchw ? xla::Transpose(x, {0, 2, 3, 1}) : x;
}
xla::XlaOp ToDataFormat(const Call& c, xla::XlaOp x) {
  return c.attrs.nchw ? xla::Transpose(x, {0, 3, 1, 2}) : x;
}

xla::XlaOp ReadChannelsLast(XlaOpKernelContext* context, const Call& c, int i) {
  return xla::ConvertElementType(ToChannelsLast(c, Padded(context, i)), c.acc);
}

xla::XlaOp PooledOutput(const Call& c, xla::XlaOp pooled) {
  return BoxRows(c, ToDataFormat(c, pooled));
}

xla::XlaOp FeaturesGradOutput(const Call& c, xla::XlaOp grad) {
  return ToDataFormat(c, xla::Reshape(xla::ConvertElementType(grad, c.type),
                                      {c.shape.batch, c.shape.height,
                                       c.shape.width, c.shape.channels}));
}

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

xla::XlaOp MaskedMax(const Call& c, xla::XlaOp values, xla::XlaOp mask) {
  return xla::ReduceAll(xla::Select(mask, values, xla::ZerosLike(values)),
                        c.I(0), xla::CreateScalarMaxComputation(xla::S32, c.b));
}

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

std::vector<xla::XlaOp> GroupIndex(const Call& c) {
  if (!c.attrs.position_sensitive()) {
    const xla::XlaOp zero = c.Zeros(xla::S32, c.bins_dims());
    return {zero, zero};
  }
  return {c.Iota(xla::S32, c.bins_dims(), 1),
          c.Iota(xla::S32, c.bins_dims(), 2)};
}

BinIndex MakeBinIndex(const Call& c, xla::XlaOp batch) {
  const std::vector<xla::XlaOp> groups = GroupIndex(c);
  return {c.PerBox(batch), groups[0], groups[1]};
}

Status MakeGradCall(XlaOpKernelContext* context, const RoiAttrs& attrs,
                    TensorShape* features_shape, Call* call) {
  // features_shape, the last input, is a compile-time constant.
  const int index = context->num_inputs() - 1;
  std::vector<int64_t> values;
  TF_RETURN_IF_ERROR(context->ConstantInputAsIntVector(index, &values));
  TF_RETURN_IF_ERROR(roi::FeaturesShapeFromValues(context->InputShape(index),
                                                  values, features_shape));
  TF_RETURN_IF_ERROR(
      MakeCall(context, attrs, *features_shape, "features_shape", call));
  return roi::CheckPooledGradShape(context->InputShape(0), call->shape, attrs,
                                   "grads");
}

}  // namespace hlo
}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
