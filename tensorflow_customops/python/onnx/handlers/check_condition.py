"""ONNX handler of CheckCondition: an ONNX graph cannot raise, so the check
is left out and its values pass through, as under XLA where a compiled
program cannot raise (docs/xla.md)."""

from tensorflow_customops.python.onnx import handler_util


@handler_util.custom_op_handler("CheckCondition", min_opset=16)
class CheckCondition:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        # Input 0 is the condition; output i is input i + 1.
        values = list(node.input[1:])
        outputs = list(node.output)
        dtypes = [ctx.get_dtype(y) for y in outputs]
        shapes = [ctx.get_shape(y) for y in outputs]
        name = node.name
        ctx.remove_node(name)
        for i, (x, y) in enumerate(zip(values, outputs)):
            ctx.make_node(
                "Identity",
                [x],
                name=f"{name}/{i}" if i else name,
                outputs=[y],
                shapes=[shapes[i]],
                dtypes=[dtypes[i]],
            )
