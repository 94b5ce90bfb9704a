"""What the ONNX handlers of the custom ops share: registration with the
lowest opset each needs, the export target, refusals, and the NHWC/NCHW
layout plumbing. Imports tf2onnx, so only the export imports it.
"""

import contextlib

import numpy as np
from onnx import TensorProto
from tf2onnx import handler, utils

from tensorflow_customops.python.onnx.errors import ExportError

OP_PREFIX = "CustomOps>"

# Op type -> the lowest opset its handler writes.
MIN_OPSETS = {}

_exports = []


def custom_op_handler(name, min_opset):
    """Registers the decorated class as tf2onnx's handler of `CustomOps>name`.

    The class defines `version_<min_opset>(cls, ctx, node, **kwargs)`, which
    tf2onnx calls for every opset from `min_opset` on.
    """

    def register(cls):
        if not hasattr(cls, f"version_{min_opset}"):
            raise TypeError(f"{cls.__name__} has no version_{min_opset}")
        MIN_OPSETS[OP_PREFIX + name] = min_opset
        return handler.tf_op(OP_PREFIX + name)(cls)

    return register


class _Export:
    def __init__(self, target):
        self.target = target
        self.refusals = []


@contextlib.contextmanager
def exporting(target):
    """Scope of one conversion for `target` ("onnxruntime" or "tensorrt").

    Yields the list of refusal messages the handlers raised. tf2onnx logs a
    handler's exception and carries on, so the export reads them from here.
    """
    _exports.append(_Export(target))
    try:
        yield _exports[-1].refusals
    finally:
        _exports.pop()


def target():
    """The runtime the model being converted is for."""
    return _exports[-1].target if _exports else "onnxruntime"


def refuse(node, why):
    """Refuses to convert `node`, naming it; the export raises ExportError."""
    message = f"{node.type} (node {node.name!r}): {why}"
    if _exports:
        _exports[-1].refusals.append(message)
    raise ExportError(message)


def op(ctx, op_type, *inputs, **attr):
    """The output of a new one-output ONNX node `op_type` on `inputs`."""
    return ctx.make_node(op_type, list(inputs), attr=attr).output[0]


def const(ctx, value, dtype):
    """A constant tensor `value` of NumPy `dtype`."""
    return ctx.make_const(utils.make_name("const"), np.array(value, dtype)).output[0]


def is_nchw(node):
    return node.get_attr_str("data_format") == "NCHW"


def nchw_input(ctx, node, index):
    """Input `index` of `node` in NCHW, transposed from NHWC where needed."""
    if is_nchw(node):
        return node.input[index]
    return ctx.make_node(
        "Transpose", [node.input[index]], attr={"perm": [0, 3, 1, 2]}
    ).output[0]


def refuse_double_for_tensorrt(node, dtype):
    """Refuses a double `dtype` (ONNX) when exporting for TensorRT, which
    computes double as float: other values, not an error, at run time."""
    if dtype == TensorProto.DOUBLE and target() == "tensorrt":
        refuse(
            node,
            "TensorRT computes double as float: cast to float32, or export for "
            'target="onnxruntime"',
        )


def replace_with_op(ctx, node, op_type, inputs, attr):
    """Replaces `node` by `op_type` computing its first output (any other is
    unused); the new node keeps its name, output, shape and dtype. Returns
    the new node."""
    dtypes = [ctx.get_dtype(node.output[0])]
    shapes = [ctx.get_shape(node.output[0])]
    outputs = [node.output[0]]
    ctx.remove_node(node.name)
    return ctx.make_node(
        op_type,
        inputs,
        attr=attr,
        name=node.name,
        outputs=outputs,
        shapes=shapes,
        dtypes=dtypes,
    )


def replace_with_identities(ctx, node, inputs):
    """Replaces `node` by one Identity per output, output i passing
    `inputs[i]` through: the checks ONNX cannot express, since an ONNX model
    cannot fail a run."""
    outputs = list(node.output)
    shapes = [ctx.get_shape(y) for y in outputs]
    dtypes = [ctx.get_dtype(y) for y in outputs]
    ctx.remove_node(node.name)
    for i, (x, y) in enumerate(zip(inputs, outputs)):
        ctx.make_node(
            "Identity",
            [x],
            name=f"{node.name}_{i}",
            outputs=[y],
            shapes=[shapes[i]],
            dtypes=[dtypes[i]],
        )


def replace_with_nchw_op(ctx, node, op_type, inputs, attr):
    """Replaces `node` by `op_type`, which computes its first output (in its
    data_format; any other output is unused) in NCHW; transposes back where
    `node` is NHWC. Returns the new ONNX node.
    """
    if is_nchw(node):
        return replace_with_op(ctx, node, op_type, inputs, attr)
    op = ctx.make_node(op_type, inputs, attr=attr)
    replace_with_op(ctx, node, "Transpose", op.output, {"perm": [0, 2, 3, 1]})
    return op
