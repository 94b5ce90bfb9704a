"""ONNX handler of ClipByGlobalNorm: the kernel's arithmetic as a composition.

The squares are summed in double, as the kernel does, in ORT's order rather
than the kernel's, and the square root rounded to the dtype; the scale is
clip_norm * min(1 / norm, 1 / clip_norm) + (norm - norm) in the dtype, with
the kernel's NaN-propagating minimum, so an inf or NaN norm makes every
element NaN. half and bfloat16 are computed in float and rounded to the dtype
after each operation, as Eigen does. For TensorRT, which computes double as
float, the squares are summed in float and double tensors are refused.
"""

import functools

from onnx import TensorProto

from tensorflow_customops.python.onnx import handler_util

_NARROW = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


@handler_util.custom_op_handler("ClipByGlobalNorm", min_opset=16)
class ClipByGlobalNorm:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[-1])
        if dtype not in (TensorProto.FLOAT, TensorProto.DOUBLE, *_NARROW):
            handler_util.refuse(
                node, "ClipByGlobalNorm exports half, bfloat16, float and double"
            )
        handler_util.refuse_double_for_tensorrt(node, dtype)
        compute = TensorProto.FLOAT if dtype in _NARROW else dtype
        # TensorRT computes double as float, so it sums the squares in float.
        sums = (
            TensorProto.FLOAT
            if handler_util.target() == "tensorrt"
            else TensorProto.DOUBLE
        )

        op = functools.partial(handler_util.op, ctx)

        def cast(x, to):
            return op("Cast", x, to=to)

        def rounded(x):
            # The dtype's rounding of a float result, where the dtype is narrower.
            return cast(cast(x, dtype), compute) if compute != dtype else x

        n = len(node.output) - 1
        tensors, clip_norm = list(node.input[:n]), node.input[n]
        squares = []
        for t in tensors:
            wide = cast(t, sums)
            squares.append(op("ReduceSum", op("Mul", wide, wide), keepdims=0))
        total = op("Sum", *squares) if n > 1 else squares[0]
        # double -> float -> the dtype: Eigen rounds a double to half or
        # bfloat16 through float.
        norm = op("Sqrt", total)
        if sums != compute:
            norm = cast(norm, TensorProto.FLOAT)
        if compute != dtype:
            norm = rounded(norm)
        clip = cast(clip_norm, compute) if compute != dtype else clip_norm
        one = handler_util.const(ctx, 1, _numpy(compute))
        inv_norm = rounded(op("Div", one, norm))
        inv_clip = rounded(op("Div", one, clip))
        take_norm = op("Or", op("IsNaN", inv_norm), op("Less", inv_norm, inv_clip))
        smaller = op("Where", take_norm, inv_norm, inv_clip)
        scale = rounded(
            op("Add", rounded(op("Mul", clip, smaller)), op("Sub", norm, norm))
        )

        outputs = list(node.output)
        shapes = [ctx.get_shape(o) for o in outputs]
        dtypes = [ctx.get_dtype(o) for o in outputs]
        ctx.remove_node(node.name)

        def output(i, op_type, inputs, attr=None):
            ctx.make_node(
                op_type,
                inputs,
                attr=attr or {},
                name=f"{node.name}_{i}",
                outputs=[outputs[i]],
                shapes=[shapes[i]],
                dtypes=[dtypes[i]],
            )

        for i, t in enumerate(tensors):
            if compute == dtype:
                output(i, "Mul", [t, scale])
            else:
                output(i, "Cast", [op("Mul", cast(t, compute), scale)], {"to": dtype})
        if compute == dtype:
            output(n, "Identity", [norm])
        else:
            output(n, "Cast", [norm], {"to": dtype})


def _numpy(onnx_type):
    return {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64"}[onnx_type]
