"""ONNX handler of RoiBoxCounts: the counts clamped to [0, K], K the boxes
per image, as its HLO lowering does where a compiled program cannot raise.
A model cannot fail a run, so counts out of range are clamped rather than
refused, and the image counts of features, boxes and counts are not compared:
each image pools its boxes up to its clamped count."""

import numpy as np
from onnx import TensorProto

from tensorflow_customops.python.onnx import handler_util


@handler_util.custom_op_handler("RoiBoxCounts", min_opset=16)
class RoiBoxCounts:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[0])
        if dtype not in (TensorProto.INT32, TensorProto.INT64):
            handler_util.refuse(node, "box counts must be int32 or int64")
        numpy_type = {TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}[dtype]
        boxes_shape = ctx.make_node("Shape", [node.input[1]]).output[0]
        boxes_per_image = ctx.make_node(
            "Gather",
            [boxes_shape, handler_util.const(ctx, 1, np.int64)],
            attr={"axis": 0},
        ).output[0]
        if dtype != TensorProto.INT64:
            boxes_per_image = ctx.make_node(
                "Cast", [boxes_per_image], attr={"to": dtype}
            ).output[0]
        handler_util.replace_with_op(
            ctx,
            node,
            "Clip",
            [node.input[2], handler_util.const(ctx, 0, numpy_type), boxes_per_image],
            {},
        )
