"""TensorFlow custom ops: RoI pooling and align for detection, deformable
convolution (DCNv2), fused ops, and their gradients, with CPU kernels, XLA
lowerings and (built where nvcc is) CUDA kernels.

    import tensorflow_customops as tfco
    tfco.zero_out([[1, 2], [3, 4]])
    tfco.layers.RoIAlign(output_size=7)  # Keras layers
    tfco.onnx.export(fn, input_signature)  # ONNX, with tf2onnx installed
"""

# TensorFlow first: the wheel requires no TensorFlow distribution, so a fresh
# install may have none, and the error must say which release to install.
try:
    import tensorflow as _tensorflow  # noqa: F401
except ModuleNotFoundError as _error:
    if _error.name != "tensorflow":
        raise
    from tensorflow_customops.python.ops import releases as _releases

    raise _releases.missing_tensorflow_error() from _error

from tensorflow_customops.python.keras import layers
from tensorflow_customops.python.ops import cpp_gradients as _cpp_gradients
from tensorflow_customops.python.ops import gradients
from tensorflow_customops.python.ops.check_condition_ops import check_condition
from tensorflow_customops.python.ops.check_numerics_n_ops import check_numerics_n
from tensorflow_customops.python.ops.clip_by_global_norm_ops import (
    clip_by_global_norm,
)
from tensorflow_customops.python.ops.cpp_gradients import cpp_gradient
from tensorflow_customops.python.ops.deform_conv2d_ops import deform_conv2d
from tensorflow_customops.python.ops.load_library import build_info
from tensorflow_customops.python.ops.matrix_mul_ops import matrix_mul
from tensorflow_customops.python.ops.roi_ops import (
    multi_scale_roi_align,
    ps_roi_align,
    ps_roi_pool,
    roi_align,
    roi_pool,
)
from tensorflow_customops.python.ops.zero_out_ops import zero_out
from tensorflow_customops.version import __version__

# Last, once every module has registered its Python gradients: ops with a C++
# gradient only get it through the bridge.
_cpp_gradients.register_missing_gradients()


def __getattr__(name):
    # tfco.onnx is imported on first use: `python -m tensorflow_customops.onnx`
    # runs it as __main__, which it must not be imported before. (It imports
    # tf2onnx only when an export runs.)
    if name == "onnx":
        import importlib

        return importlib.import_module("tensorflow_customops.onnx")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "build_info",
    "check_condition",
    "layers",
    "multi_scale_roi_align",
    "ps_roi_align",
    "ps_roi_pool",
    "roi_align",
    "roi_pool",
    "check_numerics_n",
    "clip_by_global_norm",
    "cpp_gradient",
    "deform_conv2d",
    "gradients",
    "matrix_mul",
    "onnx",
    "zero_out",
    "__version__",
]
