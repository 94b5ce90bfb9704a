"""Export of TensorFlow functions and models that use the custom ops to ONNX.
tf2onnx and onnx are imported when an export runs, never by
`import tensorflow_customops`.
"""

from tensorflow_customops.python.onnx.errors import ExportError


def export(
    fn_or_model, input_signature=None, path=None, opset=None, target="onnxruntime"
):
    """Converts a `tf.function` to a checked ONNX model and returns it."""
    import onnx
    import tf2onnx

    from tensorflow_customops.python.onnx import (
        handler_util,
        handlers,  # noqa: F401
    )

    with handler_util.exporting(target) as refusals:
        model, _ = tf2onnx.convert.from_function(
            fn_or_model,
            input_signature=input_signature,
            opset=opset or 16,
            output_path=path,
        )
    if refusals:
        raise ExportError("\n".join(refusals))
    onnx.checker.check_model(model, full_check=True)
    return model
