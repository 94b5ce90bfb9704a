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
    import tensorflow as _tensorflow
except ModuleNotFoundError as _error:
    if _error.name != "tensorflow":
        raise
    from tensorflow_customops.python.ops import releases as _releases

    raise _releases.missing_tensorflow_error() from _error

from tensorflow_customops.python.keras import layers
from tensorflow_customops.python.ops import cpp_gradients as _cpp_gradients
from tensorflow_customops.python.ops import gradients
from tensorflow_customops.python.ops import load_library as _load_library
from tensorflow_customops.python.ops import releases as _releases
from tensorflow_customops.python.ops.check_condition_ops import check_condition
from tensorflow_customops.python.ops.check_numerics_n_ops import check_numerics_n
from tensorflow_customops.python.ops.clip_by_global_norm_ops import (
    clip_by_global_norm,
)
from tensorflow_customops.python.ops.cpp_gradients import cpp_gradient
from tensorflow_customops.python.ops.deform_conv2d_ops import deform_conv2d
from tensorflow_customops.python.ops.matrix_mul_ops import matrix_mul
from tensorflow_customops.python.ops.roi_ops import (
    multi_scale_roi_align,
    ps_roi_align,
    ps_roi_pool,
    roi_align,
    roi_pool,
)
from tensorflow_customops.python.ops.zero_out_ops import zero_out
from tensorflow_customops.python.platform import build_info as _build_info
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


def build_info():
    """How this copy was built, and which TensorFlow it runs with: versions,
    C++ ABI flag, CUDA, XLA.

    Returns:
      A dict with keys `version` (this package's), `tf_running_version` (the
      TensorFlow imported in this process, whose op library was loaded),
      `tf_version` (the TensorFlow the build was configured with: in a wheel,
      the one its portable kernels and its build machine's glue were built with,
      which may differ from the running one), `tf_releases` (the TensorFlow
      releases, major.minor, this copy has op libraries for), `op_library`
      (the path of the running TensorFlow's op library, which a C or C++
      program serving a SavedModel loads), `cxx11_abi_flag`, `cxx_standard`,
      `cuda` (whether GPU kernels were compiled in), `cuda_capabilities`,
      `gpu_kernels` (whether the GPU kernels are registered: only where the
      driver and every GPU can run them; otherwise TensorFlow runs the ops on
      the CPU), `gpu_kernels_reason` (why not, or ""),
      `cuda_runtime_version` (the CUDA runtime the GPU kernels were built
      with, e.g. "13.0"), `cuda_driver_floor` (the oldest CUDA version the
      NVIDIA driver must support for them) and `cuda_driver_version` (the
      driver's; "" with no driver), see docs/gpu.md,
      `xla` (whether the XLA lowerings are loaded, so the ops compile under
      jit_compile), `xla_unavailable_reason` (why not, or ""),
      `xla_custom_calls` (whether, on CPU, the RoI ops, DeformableConv2d and
      CheckNumericsN compile to calls into their own kernels rather than to
      HLO) and `xla_custom_call_api` (through which XLA interface: "typed_ffi"
      on TensorFlow 2.20 and newer, "legacy" on 2.12 to 2.19, "" for none;
      their errors differ: docs/xla.md).
    """
    xla, xla_reason = _load_library.xla_status()
    return {
        "version": __version__,
        "tf_running_version": _tensorflow.__version__,
        "tf_version": _build_info.TF_VERSION,
        "tf_releases": _releases.supported_releases(),
        "op_library": _load_library.library_path(),
        "cxx11_abi_flag": _build_info.CXX11_ABI_FLAG,
        "cxx_standard": _build_info.CXX_STANDARD,
        "cuda": _build_info.CUDA,
        "cuda_capabilities": list(_build_info.CUDA_CAPABILITIES),
        **_load_library.gpu_support(),
        "xla": xla,
        "xla_unavailable_reason": xla_reason,
        "xla_custom_calls": _load_library.xla_custom_calls(),
        "xla_custom_call_api": _load_library.xla_custom_call_api(),
    }


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
