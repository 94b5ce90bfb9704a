"""Loads the op library, then its XLA lowerings, once for the whole package.

Loading a custom-op library built against another TensorFlow release fails
with undefined symbols or, worse, crashes later; so the TensorFlow version the
library was built against is checked first, and every failure names both
versions and the fix.

The XLA lowerings (_custom_ops_xla.so) must load after the op library, whose
ops they lower. They are optional: if they cannot load, the ops still work
outside XLA and xla_status() says why.
"""

import ctypes
import functools
import os

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session
from tensorflow.python.framework import kernels

from tensorflow_customops.python.platform import build_info as _build_info

LIBRARY_NAME = "_custom_ops.so"
XLA_LIBRARY_NAME = "_custom_ops_xla.so"
_REBUILD_HINT = (
    "rebuild tensorflow_customops from source against the installed TensorFlow "
    "(`tools/build_wheel.sh` in a checkout of the repository)"
)


class LibraryLoadError(ImportError):
    """The op library is missing or does not fit the installed TensorFlow."""


def _major_minor(version):
    return tuple(version.split(".")[:2])


def check_tensorflow_version(installed, built_against):
    """Raises LibraryLoadError unless the two TensorFlow versions share major.minor.

    TensorFlow keeps its C++ ABI within a minor release only.
    """
    if _major_minor(installed) != _major_minor(built_against):
        minor = ".".join(_major_minor(built_against))
        raise LibraryLoadError(
            f"tensorflow_customops was built against TensorFlow {built_against}, but "
            f"TensorFlow {installed} is installed. Install the matching release "
            f"(`pip install 'tensorflow=={minor}.*'`) or {_REBUILD_HINT}."
        )


def library_path(name=LIBRARY_NAME):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)


def load_from(path, built_against):
    """Loads the op library at `path`, built against TensorFlow `built_against`."""
    check_tensorflow_version(tf.__version__, built_against)
    if not os.path.exists(path):
        raise LibraryLoadError(
            f"The tensorflow_customops op library is missing: {path} does not exist. "
            f"Reinstall the tensorflow_customops wheel, or build it with Bazel "
            f"(`bazel build //:build_pip_pkg`); importing the package from a source "
            f"checkout without building does not work."
        )
    try:
        return tf.load_op_library(path)
    except (tf.errors.NotFoundError, OSError) as e:
        raise LibraryLoadError(
            f"Could not load {path}, built against TensorFlow {built_against} "
            f"(installed: {tf.__version__}): {e}. {_REBUILD_HINT[0].upper()}"
            f"{_REBUILD_HINT[1:]}."
        ) from e


@functools.cache
def load_op_library():
    """Returns the module of generated op wrappers; loads the library on first use.

    Also loads the XLA lowerings (see xla_status()).
    """
    module = _load_ops()
    xla_status()
    return module


@functools.cache
def _load_ops():
    return load_from(library_path(), _build_info.TF_VERSION)


def _has_xla_kernel(op_name):
    return any(
        k.device_type == "XLA_CPU_JIT"
        for k in kernels.get_registered_kernels_for_op(op_name).kernel
    )


def load_xla_from(path, probe_op):
    """Loads the XLA lowerings at `path`, after the op library.

    XLA makes kernels of the registered lowerings once per process, at its
    first compilation. If that has already happened (a jit_compile function
    ran before this import), the library registers its kernels itself.
    `probe_op` is one of the lowered ops.
    """
    tf.load_op_library(path)
    if _has_xla_kernel("Identity") and not _has_xla_kernel(probe_op):
        ctypes.CDLL(path).TfcoRegisterLateXlaKernels()
        if not _has_xla_kernel(probe_op):
            raise LibraryLoadError(f"{probe_op} has no XLA kernel after loading {path}")


@functools.cache
def xla_status():
    """(True, "") once the XLA lowerings are loaded, else (False, the reason)."""
    if not _build_info.XLA:
        return False, "this copy was built without XLA lowerings (--config=noxla)"
    path = library_path(XLA_LIBRARY_NAME)
    if not os.path.exists(path):
        return False, f"{path} does not exist"
    _load_ops()
    try:
        load_xla_from(path, "CustomOps>ZeroOut")
    except (tf.errors.OpError, OSError, AttributeError, LibraryLoadError) as e:
        return False, f"{path} did not load: {e}"
    return True, ""


def op_list():
    """The OpList of every op the library registers, for tests and tools.

    tf.load_op_library keeps only the generated Python wrappers, so the specs
    are read back through the library handle (loading is idempotent).
    """
    load_op_library()
    handle = pywrap_tf_session.TF_LoadLibrary(library_path())
    try:
        serialized = pywrap_tf_session.TF_GetOpList(handle)
    finally:
        pywrap_tf_session.TF_DeleteLibraryHandle(handle)
    ops = op_def_pb2.OpList()
    ops.ParseFromString(serialized)
    return ops
