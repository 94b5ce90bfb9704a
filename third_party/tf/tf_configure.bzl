"""Repository rule exposing the pip-installed TensorFlow (and CUDA) to Bazel.

tools/configure.py writes the values this rule reads into
.tf_configure.bazelrc as --repo_env settings. The generated repository holds:
  //:tf_header_lib        TensorFlow's headers (includes CUDA 12 headers).
  //:tf_headers           the same files, for genrules (nvcc).
  //:eigen_header_lib     Eigen alone (the portable kernels' headers).
  //:eigen_headers        the same files, for genrules (nvcc).
  //:tf_cuda_header_lib   adds TensorFlow's bundled CUDA headers to the path.
  //:libtensorflow_framework  the shared library file, linked by path.
  //:cudart_static        the CUDA runtime archive, when nvcc was found.
  //:cudart_static_archive_cuda12  the CUDA 12 route's (clang 16), when
                          tools/setup.sh installed it.
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

_OPTIONAL = [
    "CLANG_CUDA_CAPABILITIES",
    "CLANG_CUDA_PATH",
    "CLANG_CUDA_PTX_VERSION",
    "CLANG_CUDA_TOOLKIT_PATH",
    "CUDA_TOOLKIT_PATH",
    "NVCC_PATH",
    "TF_CC_LIBRARY_NAME",
    "TF_CUDA_CAPABILITIES",
]

def _tf_configure_impl(ctx):
    env = ctx.os.environ
    missing = [k for k in _REQUIRED if k not in env]
    if missing:
        fail("TensorFlow is not configured (missing %s). Run `python3 tools/configure.py` " %
             ", ".join(missing) + "with the Python that has TensorFlow, then build again.")

    ctx.symlink(env["TF_HEADER_DIR"], "include")

    # Eigen alone, for the portable kernels, which must not see TensorFlow's
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
    clang_cuda = env.get("CLANG_CUDA_PATH", "")
    if clang_cuda:
        ctx.symlink(
            env["CLANG_CUDA_TOOLKIT_PATH"] + "/lib64/libcudart_static.a",
            "cuda12/lib64/libcudart_static.a",
        )

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

# Eigen (header-only) without TensorFlow's headers: the portable kernels' only
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

# The libraries a glue may import from.
filegroup(
    name = "tf_libraries",
    srcs = glob(["lib/*"]),
)

filegroup(
    name = "cudart_static_archive",
    srcs = glob(["cuda/lib64/libcudart_static.a"]),
)

filegroup(
    name = "cudart_static_archive_cuda12",
    srcs = glob(["cuda12/lib64/libcudart_static.a"]),
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
CLANG_CUDA_PATH = "{clang_cuda}"
CLANG_CUDA_TOOLKIT_PATH = "{clang_cuda_toolkit}"
CLANG_CUDA_CAPABILITIES = {clang_caps}
CLANG_CUDA_PTX_VERSION = {clang_ptx}
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
        clang_cuda = clang_cuda,
        clang_cuda_toolkit = env.get("CLANG_CUDA_TOOLKIT_PATH", ""),
        clang_caps = repr([c for c in env.get("CLANG_CUDA_CAPABILITIES", "").split(",") if c]),
        clang_ptx = int(env.get("CLANG_CUDA_PTX_VERSION", "0")),
    ), executable = False)

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = _REQUIRED + _OPTIONAL,
    local = True,
)

def _tf_release_impl(ctx):
    release = ctx.attr.release
    cache = ctx.os.environ.get("TFCO_TF_CACHE", "")
    folder = ctx.path("%s/%s" % (cache, release)) if cache else None
    if folder and folder.get_child("VERSION").exists:
        ctx.symlink(folder.get_child("include"), "include")
        for lib in _RELEASE_LIBRARIES:
            ctx.symlink(folder.get_child(lib + ".symbols.gz"), lib + ".symbols.gz")
        ctx.symlink(folder.get_child("CXX11_ABI_FLAG"), "CXX11_ABI_FLAG")
        ctx.symlink(folder.get_child("VERSION"), "VERSION")
        missing = ""
        tma = folder.get_child("include").get_child("xla").get_child("stream_executor")
        tma = tma.get_child("gpu").get_child("tma_metadata.h")
        needs_llvm_adt = tma.exists and '"llvm/ADT/' in ctx.read(tma)
    else:
        needs_llvm_adt = False
        missing = ("TensorFlow %s's headers are not in the cache (%s): run " +
                   "`tools/fetch_tf_headers.py %s`, or tools/build_wheel.sh, which does.") % (
            release,
            cache or "TFCO_TF_CACHE is not set: run tools/configure.py",
            release,
        )
    ctx.file("BUILD", _RELEASE_BUILD.format(
        release = release,
        missing = missing,
        libs = repr(_RELEASE_LIBRARIES),
        # 2.19's headers name LLVM classes the wheel lacks: see llvm_adt/.
        extra_deps = repr(["@//third_party/tf:llvm_adt"] if needs_llvm_adt else []),
    ), executable = False)

# What a glue links: each library is an empty stand-in with the real one's
# SONAME, and the names the real one exports, which check the glue's imports.
_RELEASE_LIBRARIES = ["libtensorflow_framework.so.2", "libtensorflow_cc.so.2"]

_RELEASE_BUILD = """package(default_visibility = ["//visibility:public"])

MISSING = "{missing}"

# Without a cache, every target fails with MISSING when it is built (not when
# it is loaded, so `//...` still works for the installed TensorFlow).
genrule(
    name = "cached",
    outs = ["cached.txt"],
    cmd = "echo '%s' >&2; exit 1" % MISSING if MISSING else "touch $@",
)

cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**"]) + [":cached.txt"],
    includes = ["include"],
    deps = {extra_deps},
)

cc_library(
    name = "tf_cuda_header_lib",
    includes = ["include/third_party/gpus/cuda/include"],
    deps = [":tf_header_lib"],
)

[genrule(
    name = lib + "_stub",
    srcs = [":cached.txt"],
    outs = ["lib/" + lib],
    cmd = "echo | $(CC) -x c -shared -nostdlib -Wl,-soname,%s -o $@ -" % lib,
    toolchains = ["@bazel_tools//tools/cpp:current_cc_toolchain"],
) for lib in {libs}]

filegroup(
    name = "symbols",
    srcs = [lib + ".symbols.gz" for lib in {libs}] if not MISSING else [":cached.txt"],
)

filegroup(
    name = "cxx11_abi_flag",
    srcs = ["CXX11_ABI_FLAG"] if not MISSING else [":cached.txt"],
)
"""

tf_release_repository = repository_rule(
    implementation = _tf_release_impl,
    attrs = {"release": attr.string(mandatory = True)},
    environ = ["TFCO_TF_CACHE"],
    local = True,
)

def tf_release_repositories(releases):
    """@tf_2_NN for each release: its headers, from tools/fetch_tf_headers.py's cache."""
    for release in releases:
        tf_release_repository(name = "tf_" + release.replace(".", "_"), release = release)
