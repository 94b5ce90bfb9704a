"""ONNX handler of DeformableConv2d: ONNX DeformConv (opset 19), whose
offsets and mask are laid out as the op's NCHW ones (torchvision's)."""

from onnx import TensorProto

from tensorflow_customops.python.onnx import handler_util

# Half and bfloat16 (which DeformConv does not take) are convolved in float,
# as the kernels accumulate them, and rounded once at the end.
_WIDENED = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


def _spatial(node, name):
    """The (height, width) entries of a 4-entry attr in data_format order."""
    values = node.get_attr_value(name)
    return (values[2], values[3]) if handler_util.is_nchw(node) else values[1:3]


def _pads(node, size, kernel, strides, dilations):
    """ONNX's pads, [top, left, bottom, right], as the op pads: SAME as
    Conv2D (the odd pixel after), EXPLICIT from explicit_paddings. `size` is
    the input's (height, width), -1 where unknown."""
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
    for dim, n, k, s, d in zip(("height", "width"), size, kernel, strides, dilations):
        window = (k - 1) * d + 1
        if n < 0 and s > 1:
            handler_util.refuse(
                node,
                f"SAME padding with stride {s} needs the input's {dim} known "
                "when converting: ONNX DeformConv's pads are attributes",
            )
        # With stride 1 the total is window - 1 whatever the size.
        total = window - 1 if s == 1 else max((-(-n // s) - 1) * s + window - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


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
        pads = _pads(node, size, (kh, kw), strides, dilations)
        if handler_util.target() == "tensorrt" and pads[:2] != pads[2:]:
            handler_util.refuse(
                node,
                f"TensorRT's DeformConv takes equal padding at both ends of each "
                f"axis, got [top, left, bottom, right] = {pads}",
            )

        def prepare(index):
            tensor = handler_util.nchw_input(ctx, node, index)
            if compute != dtype:
                tensor = ctx.make_node("Cast", [tensor], attr={"to": compute}).output[0]
            return tensor

        use_mask = node.get_attr_value("use_mask")
        filter_oihw = ctx.make_node(
            "Transpose", [node.input[1]], attr={"perm": [3, 2, 0, 1]}
        ).output[0]
        if compute != dtype:
            filter_oihw = ctx.make_node(
                "Cast", [filter_oihw], attr={"to": compute}
            ).output[0]
        # Inputs X, W, offset, B (none: the op has no bias) and mask.
        inputs = [prepare(0), filter_oihw, prepare(2)]
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
