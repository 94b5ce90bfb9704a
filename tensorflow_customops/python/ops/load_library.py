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

from tensorflow_customops.python.ops.releases import (
    LIBRARY_NAME,
    describe,
    glue_folders,
    install_command,
    major_minor,
    supported_releases,
)
from tensorflow_customops.python.platform import build_info as _build_info
from tensorflow_customops.version import __version__

XLA_LIBRARY_NAME = "_custom_ops_xla.so"
_BUILD_COMMAND = (
    "build tensorflow_customops for the installed TensorFlow with "
    "`tools/build_wheel.sh --installed-only` in a checkout of the repository "
    "(it keeps the installed TensorFlow)"
)
# Development and nightly builds share a version's major.minor but not its
# C++ ABI.
_DEV_MARKERS = ("dev", "nightly")


class LibraryLoadError(ImportError):
    """The op library is missing or does not fit the installed TensorFlow."""


def check_tensorflow_version(installed, supported):
    """Raises LibraryLoadError unless TensorFlow `installed` is one of the
    `supported` releases (major.minor).

    TensorFlow keeps its C++ ABI within a minor release only, and not even
    there for development builds.
    """
    dev = any(marker in installed for marker in _DEV_MARKERS)
    if not dev and major_minor(installed) in supported:
        return
    kind = "a development build" if dev else "not a supported release"
    raise LibraryLoadError(
        f"TensorFlow {installed} is installed, which is {kind}: this copy of "
        f"tensorflow_customops has op libraries for TensorFlow "
        f"{describe(supported)}. Install a supported release "
        f"({install_command(supported)}, or tensorflow-cpu), or {_BUILD_COMMAND}."
    )


def check_abi_flag(installed, built_against):
    """Raises LibraryLoadError unless TensorFlow's _GLIBCXX_USE_CXX11_ABI
    (`installed`) is the one the library was built with."""
    if installed != built_against:
        raise LibraryLoadError(
            f"The installed TensorFlow was built with _GLIBCXX_USE_CXX11_ABI="
            f"{installed}, tensorflow_customops with {built_against}: their C++ "
            f"libraries cannot work together. Use TensorFlow from PyPI, or "
            f"{_BUILD_COMMAND}."
        )


@functools.cache
def _glue_folder():
    """The installed TensorFlow's folder of op libraries; checks the version
    first, so that no library built for another release is ever loaded, and
    picks one folder per process."""
    folders = glue_folders()
    check_tensorflow_version(tf.__version__, list(folders))
    check_abi_flag(tf.sysconfig.CXX11_ABI_FLAG, _build_info.CXX11_ABI_FLAG)
    return folders[major_minor(tf.__version__)]


def library_path(name=LIBRARY_NAME):
    """Path of the op library `name` for the installed TensorFlow."""
    return os.path.join(_glue_folder(), name)


def load_from(path):
    """Loads the op library at `path`."""
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
            f"Could not load {path} (installed TensorFlow: {tf.__version__}): {e}. "
            f"Reinstall tensorflow_customops, or {_BUILD_COMMAND}."
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
    return load_from(library_path())


def _has_xla_kernel(op_name):
    return any(
        k.device_type == "XLA_CPU_JIT"
        for k in kernels.get_registered_kernels_for_op(op_name).kernel
    )


def load_xla_from(path, op_names):
    """Loads the XLA lowerings at `path`, after the op library.

    XLA makes kernels of the registered lowerings once per process, at its
    first compilation. If that has already happened (a jit_compile function
    ran before this import), the library registers its kernels itself.
    `op_names` are the op library's ops, some of which the lowerings lower.
    """
    tf.load_op_library(path)

    def lowered():
        return any(_has_xla_kernel(name) for name in op_names)

    if _has_xla_kernel("Identity") and not lowered():
        ctypes.CDLL(path).TfcoRegisterLateXlaKernels()
        if not lowered():
            raise LibraryLoadError(f"no op has an XLA kernel after loading {path}")


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
        load_xla_from(path, [op.name for op in _read_op_list().op])
    except (tf.errors.OpError, OSError, AttributeError, LibraryLoadError) as e:
        return False, f"{path} did not load: {e}"
    return True, ""


# TfcoXlaCustomCalls(): which custom calls the lowerings make.
_CUSTOM_CALL_APIS = {0: "", 1: "typed_ffi", 2: "legacy"}


@functools.cache
def xla_custom_call_api():
    """How the loaded XLA lowerings call the library's own CPU kernels:
    "typed_ffi" (TensorFlow 2.20 and newer), "legacy" (XLA's legacy custom
    calls, 2.12 to 2.19), or "" where they build HLO only or are not loaded
    (docs/xla.md)."""
    if not xla_status()[0]:
        return ""
    library = ctypes.CDLL(library_path(XLA_LIBRARY_NAME))
    # Lowerings that all build HLO link no custom-call code, and so no
    # TfcoXlaCustomCalls.
    if not hasattr(library, "TfcoXlaCustomCalls"):
        return ""
    return _CUSTOM_CALL_APIS[library.TfcoXlaCustomCalls()]


@functools.cache
def xla_ffi_handlers():
    """The handlers the loaded XLA lowerings registered with XLA's typed FFI
    (TensorFlow 2.20 and newer), as {platform: sorted custom-call targets},
    platform "Host" or "CUDA" (--config=cuda builds); {} otherwise."""
    if xla_custom_call_api() != "typed_ffi":
        return {}
    listed = ctypes.CDLL(library_path(XLA_LIBRARY_NAME)).TfcoXlaFfiHandlers
    listed.restype = ctypes.c_char_p
    handlers = {}
    for line in listed().decode().splitlines():
        platform, target = line.split(":", 1)
        handlers.setdefault(platform, []).append(target)
    return {platform: sorted(targets) for platform, targets in handlers.items()}


def xla_custom_calls():
    """Whether the loaded XLA lowerings call the library's own CPU kernels
    rather than build HLO only; False without XLA lowerings."""
    return xla_custom_call_api() != ""


PORTABLE_LIBRARY_NAME = "_tensorflow_customops_portable_kernels.so"


class _GpuSupport(ctypes.Structure):
    # TfcoGpuSupport (core/kernels/portable/gpu_support.h).
    _fields_ = [
        ("compiled", ctypes.c_int),
        ("usable", ctypes.c_int),
        ("runtime_version", ctypes.c_int),
        ("driver_floor", ctypes.c_int),
        ("driver_version", ctypes.c_int),
        ("code", ctypes.c_char_p),
        ("reason", ctypes.c_char_p),
    ]


def _cuda_version(version):
    """ "13.0" for CUDA's 13000; "" for 0."""
    return f"{version // 1000}.{version % 1000 // 10}" if version > 0 else ""


@functools.cache
def gpu_support():
    """Whether the op library registered its GPU kernels, and why not: the
    portable kernels' decision (docs/gpu.md), made when the op library loaded.

    Returns a dict: `gpu_kernels` (bool), `gpu_kernels_reason` ("" when
    registered), `cuda_runtime_version` (the CUDA runtime the GPU kernels
    were built with, e.g. "13.0"), `cuda_driver_floor` (the oldest CUDA
    version a driver must support to run them) and `cuda_driver_version`
    (the driver's, "" with no driver); the versions are "" without CUDA
    kernels.
    """
    load_op_library()
    core = ctypes.CDLL(os.path.join(os.path.dirname(__file__), PORTABLE_LIBRARY_NAME))
    core.TfcoGetGpuSupport.restype = ctypes.POINTER(_GpuSupport)
    support = core.TfcoGetGpuSupport().contents
    return {
        "gpu_kernels": bool(support.usable),
        "gpu_kernels_reason": support.reason.decode(),
        "cuda_runtime_version": _cuda_version(support.runtime_version),
        "cuda_driver_floor": _cuda_version(support.driver_floor),
        "cuda_driver_version": _cuda_version(support.driver_version),
    }


def op_list():
    """The OpList of every op the library registers, for tests and tools.

    tf.load_op_library keeps only the generated Python wrappers, so the specs
    are read back through the library handle (loading is idempotent).
    """
    load_op_library()
    return _read_op_list()


def _read_op_list():
    handle = pywrap_tf_session.TF_LoadLibrary(library_path(LIBRARY_NAME))
    try:
        serialized = pywrap_tf_session.TF_GetOpList(handle)
    finally:
        pywrap_tf_session.TF_DeleteLibraryHandle(handle)
    ops = op_def_pb2.OpList()
    ops.ParseFromString(serialized)
    return ops


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
      `xla_custom_calls` (whether, on CPU, the ops whose lowerings make
      custom calls compile to calls into their own kernels rather than to
      HLO), `xla_custom_call_api` (through which XLA interface: "typed_ffi"
      on TensorFlow 2.20 and newer, "legacy" on 2.12 to 2.19, "" for none;
      their errors differ: docs/xla.md) and `xla_ffi_handlers` (with typed
      FFI, the custom-call targets the library registered, by platform:
      {"Host": [...], "CUDA": [...]}; else {}).
    """
    xla, xla_reason = xla_status()
    return {
        "version": __version__,
        "tf_running_version": tf.__version__,
        "tf_version": _build_info.TF_VERSION,
        "tf_releases": supported_releases(),
        "op_library": library_path(),
        "cxx11_abi_flag": _build_info.CXX11_ABI_FLAG,
        "cxx_standard": _build_info.CXX_STANDARD,
        "cuda": _build_info.CUDA,
        "cuda_capabilities": list(_build_info.CUDA_CAPABILITIES),
        **gpu_support(),
        "xla": xla,
        "xla_unavailable_reason": xla_reason,
        "xla_custom_calls": xla_custom_calls(),
        "xla_custom_call_api": xla_custom_call_api(),
        "xla_ffi_handlers": xla_ffi_handlers(),
    }
