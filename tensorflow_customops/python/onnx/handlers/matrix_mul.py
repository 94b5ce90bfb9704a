"""ONNX handler of MatrixMul: Gemm, whose transA and transB are the op's
transpose_a and transpose_b."""

from onnx import TensorProto

from tensorflow_customops.python.onnx import handler_util

# half and bfloat16 are multiplied in float and rounded once, as the kernels
# do; ORT's Gemm has no bfloat16 kernel.
_WIDENED = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


@handler_util.custom_op_handler("MatrixMul", min_opset=16)
class MatrixMul:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[0])
        attr = {
            "transA": int(node.get_attr_value("transpose_a")),
            "transB": int(node.get_attr_value("transpose_b")),
        }
        handler_util.refuse_double_for_tensorrt(node, dtype)
        if dtype in (TensorProto.FLOAT, TensorProto.DOUBLE):
            handler_util.replace_with_op(ctx, node, "Gemm", list(node.input), attr)
            return
        if dtype not in _WIDENED:
            handler_util.refuse(
                node, "MatrixMul exports half, bfloat16, float and double"
            )
        a, b = (
            ctx.make_node("Cast", [x], attr={"to": TensorProto.FLOAT}).output[0]
            for x in node.input
        )
        product = ctx.make_node("Gemm", [a, b], attr=attr).output[0]
        handler_util.replace_with_op(ctx, node, "Cast", [product], {"to": dtype})
