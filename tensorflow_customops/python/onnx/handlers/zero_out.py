"""ONNX handler of ZeroOut: a Where over the row-major positions of the
flattened tensor, so any shape, known or not when exported."""

import numpy as np
from onnx import TensorProto
from tf2onnx import utils

from tensorflow_customops.python.onnx import handler_util

# ORT's Where has no bfloat16 kernel; bfloat16 goes through float, which holds
# every bfloat16 value (NaN included) exactly.
_THROUGH_FLOAT = (TensorProto.BFLOAT16,)


@handler_util.custom_op_handler("ZeroOut", min_opset=16)
class ZeroOut:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[0])
        keep = node.get_attr_value("keep")
        if keep < 0:
            # The kernel refuses it when it runs; a model cannot.
            handler_util.refuse(node, f"keep must be >= 0, got {keep}")
        handler_util.refuse_double_for_tensorrt(node, dtype)
        x = node.input[0]
        compute = TensorProto.FLOAT if dtype in _THROUGH_FLOAT else dtype
        if compute != dtype:
            x = ctx.make_node("Cast", [x], attr={"to": compute}).output[0]
        flat = ctx.make_node(
            "Reshape", [x, handler_util.const(ctx, [-1], np.int64)]
        ).output[0]
        index = ctx.make_node(
            "Range",
            [
                handler_util.const(ctx, 0, np.int64),
                ctx.make_node("Size", [x]).output[0],
                handler_util.const(ctx, 1, np.int64),
            ],
        ).output[0]
        kept = ctx.make_node(
            "Less", [index, handler_util.const(ctx, keep, np.int64)]
        ).output[0]
        zero = handler_util.const(ctx, 0, utils.map_onnx_to_numpy_type(compute))
        zeroed = ctx.make_node("Where", [kept, flat, zero]).output[0]
        shape = ctx.make_node("Shape", [x]).output[0]
        if compute == dtype:
            handler_util.replace_with_op(ctx, node, "Reshape", [zeroed, shape], {})
            return
        zeroed = ctx.make_node("Reshape", [zeroed, shape]).output[0]
        handler_util.replace_with_op(ctx, node, "Cast", [zeroed], {"to": dtype})
