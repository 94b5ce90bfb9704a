"""ONNX handler of CheckNumericsN: one Identity per tensor. ONNX has no op
that fails a run, so the exported model passes NaN and Inf through unchecked
(as tf2onnx does with TensorFlow's CheckNumerics)."""

from tensorflow_customops.python.onnx import handler_util


@handler_util.custom_op_handler("CheckNumericsN", min_opset=16)
class CheckNumericsN:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        for output in node.output:
            handler_util.refuse_double_for_tensorrt(node, ctx.get_dtype(output))
        handler_util.replace_with_identities(ctx, node, list(node.input))
