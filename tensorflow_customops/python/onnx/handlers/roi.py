"""ONNX handlers of the RoI family."""

from onnx import TensorProto

from tensorflow_customops.python.onnx import handler_util

# Feature dtypes ONNX's RoiAlign computes in; half and bfloat16 features are
# pooled in float, as the kernels accumulate them, and rounded once at the end.
_ROI_ALIGN_DTYPES = (TensorProto.FLOAT, TensorProto.DOUBLE)
_WIDENED = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


@handler_util.custom_op_handler("RoiAlign", min_opset=16)
class RoiAlign:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[0])
        compute = TensorProto.FLOAT if dtype in _WIDENED else dtype
        if compute not in _ROI_ALIGN_DTYPES:
            handler_util.refuse(node, "ONNX RoiAlign takes float or double features")
        features = handler_util.nchw_input(ctx, node, 0)
        if compute != dtype:
            features = ctx.make_node("Cast", [features], attr={"to": compute}).output[0]
        boxes, batch = handler_util.split_rois(ctx, node, 1, compute)
        aligned = node.get_attr_value("aligned")
        attr = {
            # output_half_pixel also enlarges boxes to 1x1, as aligned=False does.
            "coordinate_transformation_mode": "half_pixel"
            if aligned
            else "output_half_pixel",
            "mode": "avg",
            "output_height": node.get_attr_value("pooled_height"),
            "output_width": node.get_attr_value("pooled_width"),
            # Written even where 0: TensorRT's parser defaults it to 1.
            "sampling_ratio": max(node.get_attr_value("sampling_ratio"), 0),
            "spatial_scale": node.get_attr_value("spatial_scale"),
        }
        if compute == dtype:
            handler_util.replace_with_nchw_op(
                ctx, node, "RoiAlign", [features, boxes, batch], attr
            )
            return
        pooled = ctx.make_node("RoiAlign", [features, boxes, batch], attr=attr).output[
            0
        ]
        handler_util.replace_with_nchw_op(ctx, node, "Cast", [pooled], {"to": dtype})
