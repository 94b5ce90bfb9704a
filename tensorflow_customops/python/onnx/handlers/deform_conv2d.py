"""ONNX handler of DeformableConv2d: ONNX DeformConv (opset 19), whose
offsets and mask are laid out as the op's NCHW ones (torchvision's)."""

import numpy as np
from onnx import TensorProto
from tf2onnx import utils
from tf2onnx.graph_builder import GraphBuilder

from tensorflow_customops.python.onnx import handler_util

# Half and bfloat16 (which DeformConv does not take) are convolved in float,
# as the kernels accumulate them, and rounded once at the end.
_WIDENED = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


def _spatial(node, name):
    """The (height, width) entries of a 4-entry attr in data_format order."""
    values = node.get_attr_value(name)
    return (values[2], values[3]) if handler_util.is_nchw(node) else values[1:3]


def _pads(node, size, windows, strides):
    """ONNX's pads, [top, left, bottom, right], as the op pads: SAME as
    Conv2D (the odd pixel after), EXPLICIT from explicit_paddings. `size` is
    the input's (height, width), -1 where unknown; None where SAME padding
    depends on a size not known when converting (a stride above 1)."""
    padding = node.get_attr_str("padding")
    if padding == "VALID":
        return [0, 0, 0, 0]
    if padding == "EXPLICIT":
        pads = node.get_attr_value("explicit_paddings")
        (top, bottom), (left, right) = (
            (pads[4:6], pads[6:8])
            if handler_util.is_nchw(node)
            else (pads[2:4], pads[4:6])
        )
        return [top, left, bottom, right]
    before, after = [], []
    for n, window, s in zip(size, windows, strides):
        if s == 1:
            total = window - 1
        elif n < 0:
            return None
        else:
            total = max((-(-n // s) - 1) * s + window - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


def _int64(ctx, values):
    return ctx.make_const(utils.make_name("pads"), np.array(values, np.int64)).output[0]


def _same_pads(ctx, x, windows, strides):
    """Pad's pads of `x` (NCHW) for SAME padding, from its size at run time:
    before each spatial axis total // 2 and after it the rest, where total =
    max((ceil(n / s) - 1) * s + window - n, 0) = max((-n mod s) + window - s,
    0)."""
    shape = ctx.make_node("Shape", [x]).output[0]
    size = GraphBuilder(ctx).make_slice(
        {"data": shape, "starts": [2], "ends": [4], "axes": [0]}
    )
    negative = ctx.make_node("Neg", [size]).output[0]
    rest = ctx.make_node("Mod", [negative, _int64(ctx, strides)]).output[0]
    excess = [w - s for w, s in zip(windows, strides)]
    total = ctx.make_node("Add", [rest, _int64(ctx, excess)]).output[0]
    total = ctx.make_node("Max", [total, _int64(ctx, [0, 0])]).output[0]
    before = ctx.make_node("Div", [total, _int64(ctx, [2, 2])]).output[0]
    after = ctx.make_node("Sub", [total, before]).output[0]
    zeros = _int64(ctx, [0, 0])
    return ctx.make_node(
        "Concat", [zeros, before, zeros, after], attr={"axis": 0}
    ).output[0]


@handler_util.custom_op_handler("DeformableConv2d", min_opset=19)
class DeformableConv2d:
    @classmethod
    def version_19(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[0])
        compute = TensorProto.FLOAT if dtype in _WIDENED else dtype
        nchw = handler_util.is_nchw(node)
        input_shape = ctx.get_shape(node.input[0])
        filter_shape = ctx.get_shape(node.input[1])
        offset_shape = ctx.get_shape(node.input[2])
        if filter_shape is None or len(filter_shape) != 4 or min(filter_shape) < 0:
            handler_util.refuse(
                node, "the filter's shape must be known when converting"
            )
        kh, kw, filter_in, _ = filter_shape
        channels = -1
        if input_shape is not None and len(input_shape) == 4:
            channels = input_shape[1 if nchw else 3]
        if channels < 0:
            handler_util.refuse(
                node,
                "the input's channels must be known when converting: ONNX "
                "DeformConv's group is an attribute",
            )
        offset_groups = node.get_attr_value("offset_groups")
        if offset_groups == 0:
            offset_channels = -1
            if offset_shape is not None and len(offset_shape) == 4:
                offset_channels = offset_shape[1 if nchw else 3]
            if offset_channels < 0:
                handler_util.refuse(
                    node,
                    "offset_groups is 0 and the offset's channels are not known "
                    "when converting: ONNX DeformConv's offset_group is an "
                    "attribute",
                )
            offset_groups = offset_channels // (2 * kh * kw)

        size = (-1, -1)
        if input_shape is not None and len(input_shape) == 4:
            size = input_shape[2:4] if nchw else input_shape[1:3]
        strides = list(_spatial(node, "strides"))
        dilations = list(_spatial(node, "dilations"))
        windows = [(k - 1) * d + 1 for k, d in zip((kh, kw), dilations)]
        pads = _pads(node, size, windows, strides)

        def prepare(index):
            tensor = handler_util.nchw_input(ctx, node, index)
            if compute != dtype:
                tensor = ctx.make_node("Cast", [tensor], attr={"to": compute}).output[0]
            return tensor

        x = prepare(0)
        # Where DeformConv's pads cannot say it, zeros padded on the input
        # do: taps on them read 0, as taps off the map do.
        if pads is None:
            # The pads depend on the size at run time; attributes cannot.
            pad = _same_pads(ctx, x, windows, strides)
            x = ctx.make_node("Pad", [x, pad]).output[0]
            pads = [0, 0, 0, 0]
        elif handler_util.target() == "tensorrt" and pads[:2] != pads[2:]:
            # TensorRT's DeformConv takes equal padding at both ends of each
            # axis. Where the op pads more after (SAME always does), the
            # rest goes after the map and every tap's coordinates stay as
            # they were; more before moves them by whole pixels, which only
            # rounds their fractions differently.
            equal = [min(pads[0], pads[2]), min(pads[1], pads[3])]
            extra = [p - e for p, e in zip(pads, equal + equal)]
            pad = _int64(ctx, [0, 0, *extra[:2], 0, 0, *extra[2:]])
            x = ctx.make_node("Pad", [x, pad]).output[0]
            pads = equal + equal

        use_mask = node.get_attr_value("use_mask")
        filter_oihw = ctx.make_node(
            "Transpose", [node.input[1]], attr={"perm": [3, 2, 0, 1]}
        ).output[0]
        if compute != dtype:
            filter_oihw = ctx.make_node(
                "Cast", [filter_oihw], attr={"to": compute}
            ).output[0]
        # Inputs X, W, offset, B (none: the op has no bias) and mask.
        inputs = [x, filter_oihw, prepare(2)]
        if use_mask:
            inputs += ["", prepare(3)]
        attr = {
            "dilations": dilations,
            "group": channels // filter_in,
            "kernel_shape": [kh, kw],
            "offset_group": offset_groups,
            "pads": pads,
            "strides": strides,
        }
        if compute == dtype:
            handler_util.replace_with_nchw_op(ctx, node, "DeformConv", inputs, attr)
            return
        output = ctx.make_node("DeformConv", inputs, attr=attr).output[0]
        handler_util.replace_with_nchw_op(ctx, node, "Cast", [output], {"to": dtype})
