"""ONNX handler of CheckCondition: an ONNX graph cannot raise, so the check
is left out and its values pass through, as under XLA where a compiled
program cannot raise (docs/xla.md)."""

from tensorflow_customops.python.onnx import handler_util


@handler_util.custom_op_handler("CheckCondition", min_opset=16)
class CheckCondition:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        for output in node.output:
            handler_util.refuse_double_for_tensorrt(node, ctx.get_dtype(output))
        # Input 0 is the condition; output i passes input i + 1.
        handler_util.replace_with_identities(ctx, node, list(node.input[1:]))
