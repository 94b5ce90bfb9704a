"""tf2onnx handlers of the custom ops, one module per op family; importing
this package registers them all."""

from tensorflow_customops.python.onnx.handlers import (
    deformable_conv2d,  # noqa: F401
    ps_roi,  # noqa: F401
    roi,  # noqa: F401
)
