"""ONNX handler of CheckNumericsN: one Identity per tensor. ONNX has no op
that fails a run, so the exported model passes NaN and Inf through unchecked
(as tf2onnx does with TensorFlow's CheckNumerics)."""

from tensorflow_customops.python.onnx import handler_util


@handler_util.custom_op_handler("CheckNumericsN", min_opset=16)
class CheckNumericsN:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        inputs = list(node.input)
        outputs = list(node.output)
        shapes = [ctx.get_shape(o) for o in outputs]
        dtypes = [ctx.get_dtype(o) for o in outputs]
        for dtype in dtypes:
            handler_util.refuse_double_for_tensorrt(node, dtype)
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
