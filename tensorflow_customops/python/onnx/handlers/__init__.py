"""tf2onnx handlers of the custom ops, one module per op family; importing
this package registers them all."""

from tensorflow_customops.python.onnx.handlers import (  # noqa: F401
    check_condition,
    roi,
)
