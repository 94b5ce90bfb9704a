"""Repository rule exposing the pip-installed TensorFlow (and CUDA) to Bazel.

tools/configure.py writes the values this rule reads into
.tf_configure.bazelrc as --repo_env settings. The generated repository holds:
  //:tf_header_lib        TensorFlow's headers (includes CUDA 12 headers).
  //:tf_headers           the same files, for genrules (nvcc).
  //:eigen_header_lib     Eigen alone (the kernel core's headers).
  //:eigen_headers        the same files, for genrules (nvcc).
  //:tf_cuda_header_lib   adds TensorFlow's bundled CUDA headers to the path.
  //:libtensorflow_framework  the shared library file, linked by path.
  //:cudart_static        the CUDA runtime archive, when nvcc was found.
  //:py_toolchain         the Python interpreter that has TensorFlow.
  //:build_defs.bzl       the values, for the flag macro.
"""

_REQUIRED = [
    "PYTHON_BIN_PATH",
    "TF_CUDA_VERSION",
    "TF_CXX11_ABI_FLAG",
    "TF_CXX_STANDARD",
    "TF_EIGEN_MAX_ALIGN_BYTES",
    "TF_HEADER_DIR",
    "TF_IS_CUDA_BUILD",
    "TF_SHARED_LIBRARY_DIR",
    "TF_SHARED_LIBRARY_NAME",
    "TF_VERSION",
]

_OPTIONAL = ["CUDA_TOOLKIT_PATH", "NVCC_PATH", "TF_CC_LIBRARY_NAME", "TF_CUDA_CAPABILITIES"]

def _tf_configure_impl(ctx):
    env = ctx.os.environ
    missing = [k for k in _REQUIRED if k not in env]
    if missing:
        fail("TensorFlow is not configured (missing %s). Run `python3 tools/configure.py` " %
             ", ".join(missing) + "with the Python that has TensorFlow, then build again.")

    ctx.symlink(env["TF_HEADER_DIR"], "include")

    # Eigen alone, for the kernel core, which must not see TensorFlow's
    # headers.
    ctx.symlink(env["TF_HEADER_DIR"] + "/Eigen", "eigen/Eigen")
    ctx.symlink(env["TF_HEADER_DIR"] + "/unsupported", "eigen/unsupported")
    lib_name = env["TF_SHARED_LIBRARY_NAME"]
    ctx.symlink(env["TF_SHARED_LIBRARY_DIR"] + "/" + lib_name, "lib/" + lib_name)
    cc_name = env.get("TF_CC_LIBRARY_NAME", "")
    if cc_name:
        ctx.symlink(env["TF_SHARED_LIBRARY_DIR"] + "/" + cc_name, "lib/" + cc_name)

    nvcc = env.get("NVCC_PATH", "")
    cuda_dir = env.get("CUDA_TOOLKIT_PATH", "")
    if nvcc:
        ctx.symlink(cuda_dir + "/lib64/libcudart_static.a", "cuda/lib64/libcudart_static.a")

    ctx.file("BUILD", """load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

package(default_visibility = ["//visibility:public"])

filegroup(
    name = "tf_headers",
    srcs = glob(["include/**"]),
)

cc_library(
    name = "tf_header_lib",
    hdrs = [":tf_headers"],
    includes = ["include"],
)

# Eigen (header-only) without TensorFlow's headers: the kernel core's only
# dependency besides the C++ and CUDA runtimes.
cc_library(
    name = "eigen_header_lib",
    hdrs = glob(["eigen/**"]),
    includes = ["eigen"],
)

filegroup(
    name = "eigen_headers",
    srcs = glob(["eigen/**"]),
)

# The CUDA headers bundled with TensorFlow, for host-compiled sources that
# include TensorFlow's GPU headers under --config=cuda.
cc_library(
    name = "tf_cuda_header_lib",
    includes = ["include/third_party/gpus/cuda/include"],
    deps = [":tf_header_lib"],
)

exports_files(glob(["lib/*"]))

filegroup(
    name = "libtensorflow_framework",
    srcs = ["lib/{lib}"],
)

cc_library(
    name = "cudart_static",
    srcs = glob(["cuda/lib64/libcudart_static.a"]),
    linkopts = ["-ldl", "-lrt", "-lpthread"],
)

py_runtime(
    name = "python3_runtime",
    interpreter_path = "{python}",
    python_version = "PY3",
)

py_runtime_pair(
    name = "python_runtimes",
    py3_runtime = ":python3_runtime",
)

toolchain(
    name = "py_toolchain",
    toolchain = ":python_runtimes",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".replace("{lib}", lib_name).replace("{python}", env["PYTHON_BIN_PATH"]), executable = False)

    caps = [c for c in env.get("TF_CUDA_CAPABILITIES", "").split(",") if c]
    ctx.file("build_defs.bzl", """\"\"\"Values read from the installed TensorFlow by tools/configure.py.\"\"\"

TF_VERSION = "{tf_version}"
TF_CXX11_ABI_FLAG = {abi}
TF_CXX_STANDARD = "{std}"
TF_EIGEN_MAX_ALIGN_BYTES = {align}
TF_IS_CUDA_BUILD = {is_cuda}
TF_CUDA_VERSION = "{cuda_version}"
TF_SHARED_LIBRARY_NAME = "{lib}"
TF_CC_LIBRARY_NAME = "{cc_lib}"
TF_SHARED_LIBRARY_DIR = "{lib_dir}"
PYTHON_BIN_PATH = "{python}"
NVCC_PATH = "{nvcc}"
CUDA_CAPABILITIES = {caps}
""".format(
        tf_version = env["TF_VERSION"],
        abi = int(env["TF_CXX11_ABI_FLAG"]),
        std = env["TF_CXX_STANDARD"],
        align = int(env["TF_EIGEN_MAX_ALIGN_BYTES"]),
        is_cuda = env["TF_IS_CUDA_BUILD"] == "1",
        cuda_version = env["TF_CUDA_VERSION"],
        lib = lib_name,
        cc_lib = cc_name,
        lib_dir = env["TF_SHARED_LIBRARY_DIR"],
        python = env["PYTHON_BIN_PATH"],
        nvcc = nvcc,
        caps = repr(caps),
    ), executable = False)

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = _REQUIRED + _OPTIONAL,
    local = True,
)
