"""Build macros for tensorflow_customops. These own every compiler and linker flag.

  TFCO_OPS               every op family and its kernel libraries
  tfco_kernels           the labels of those kernel libraries
  tfco_cc_library        op specs, gradients and kernels (CPU, and GPU under --config=cuda)
  tfco_kernel_library    one <kernel>.{h,cc} + <kernel>_gpu.cu.cc triple
  tfco_custom_op_library the shared library Python loads
  tfco_xla_library       XLA lowerings (compiler/tf2xla)
  tfco_xla_op_library    the shared library of XLA lowerings Python loads second
  tfco_with_xla          a list that names the XLA library unless it is left out
  tfco_cc_test           a C++ test of specs, shape functions and gradients
  tfco_cc_binary         a C++ tool linked against TensorFlow's framework library
                         (and its C API, with tf_cc)
  tfco_cuda_binary       a CUDA program of GPU kernels that needs no TensorFlow
  tfco_py_test           a Python test that uses the ops
  tfco_build_info        the module recording how the library was built
  tfco_cuda_code_header  the header naming the GPU code the CUDA compiler writes

All values come from the installed TensorFlow through tools/configure.py; see
third_party/tf/tf_configure.bzl.
"""

load("//third_party/tf:releases.bzl", "TF_RELEASES")
load("//third_party/tf:tf_release.bzl", "release_select")
load(
    "@local_config_tf//:build_defs.bzl",
    "CLANG_CUDA_CAPABILITIES",
    "CLANG_CUDA_PATH",
    "CLANG_CUDA_PTX_VERSION",
    "CLANG_CUDA_TOOLKIT_PATH",
    "CUDA_CAPABILITIES",
    "NVCC_PATH",
    "PYTHON_BIN_PATH",
    "TF_CC_LIBRARY_NAME",
    "TF_CXX11_ABI_FLAG",
    "TF_CXX_STANDARD",
    "TF_EIGEN_MAX_ALIGN_BYTES",
    "TF_SHARED_LIBRARY_DIR",
    "TF_SHARED_LIBRARY_NAME",
    "TF_VERSION",
)

# Op family -> its kernel libraries. A family `f` has core/ops/f_ops.cc and
# f_grad.cc, its kernels in core/kernels/f/ (tfco_kernels) and
# python/ops/f_ops.py; the BUILD files that build, load and package them read
# this table, so a new family is one line here (plus its folder).
TFCO_OPS = {
    "check_condition": ["check_condition_op"],
    "check_numerics_n": ["check_numerics_n_op"],
    "clip_by_global_norm": ["clip_by_global_norm_op"],
    "deform_conv2d": ["deform_conv2d_op"],
    "matrix_mul": ["matrix_mul_op"],
    "roi": ["roi_align_op", "roi_pool_op"],
    "roi_box_counts": ["roi_box_counts_op"],
    "zero_out": ["zero_out_op"],
}

def tfco_kernels(suffix = ""):
    """The label of every kernel library in TFCO_OPS, plus `suffix`
    ("_core": its portable kernels)."""
    return [
        "//tensorflow_customops/core/kernels/%s:%s%s" % (family, kernel, suffix)
        for family, kernels in TFCO_OPS.items()
        for kernel in kernels
    ]

_USING_CUDA = "//tensorflow_customops:using_cuda"
_USING_CUDA12 = "//tensorflow_customops:using_cuda12"
_NO_XLA = "//tensorflow_customops:no_xla"
_USING_ASAN = "//tensorflow_customops:using_asan"
_USING_UBSAN = "//tensorflow_customops:using_ubsan"
_OPT = "//tensorflow_customops:opt"
# The glue's TensorFlow: the installed one, or the release a transition picks
# (third_party/tf/tf_release.bzl).
_TF_HEADERS = "//third_party/tf:tf_header_lib"
_TF_CUDA_HEADERS = "//third_party/tf:tf_cuda_header_lib"
_TF_FRAMEWORK = "//third_party/tf:libtensorflow_framework"
_TF_CC = "//third_party/tf:libtensorflow_cc"
_TF_EXPORTS = "//third_party/tf:tf_exports"
_RELEASE = "//third_party/tf:release"
_WHEEL_RELEASES = "//third_party/tf:wheel_releases"
INSTALLED_RELEASE = ".".join(TF_VERSION.split(".")[:2])
_EIGEN_HEADERS = "@local_config_tf//:eigen_header_lib"
_KERNELS = "//tensorflow_customops/core/kernels/"
_CORE_EXPORTS = _KERNELS + "portable:exports.lds"
_CUDART = "//tensorflow_customops/core/platform:cudart"
_CUDA_ONLY = select({
    _USING_CUDA: [],
    "//conditions:default": ["@platforms//:incompatible"],
})

# Flags that must match how TensorFlow itself was compiled.
_TF_ABI_COPTS = [
    "-std=" + TF_CXX_STANDARD,
    "-D_GLIBCXX_USE_CXX11_ABI=%d" % TF_CXX11_ABI_FLAG,
    "-DEIGEN_MAX_ALIGN_BYTES=%d" % TF_EIGEN_MAX_ALIGN_BYTES,
]

# Flags of every host-compiled source, glue and portable kernels alike.
_BASE_COPTS = [
    "-fPIC",
    "-Wall",
    # GCC fuses a * b + c into one rounding wherever a function's target has
    # FMA (target_clones, target attributes), even in ISO mode; kernels that
    # pick their code by CPU at run time must round alike on every CPU.
    "-ffp-contract=off",
]

_MODE_COPTS = select({
    # Bazel's opt mode is -O2, whose cost model leaves the kernels' channel
    # loops scalar. -O3 vectorises them without reassociating anything (no
    # -ffast-math, no FMA contraction on baseline x86-64), so results keep
    # their bits.
    _OPT: ["-O3"],
    "//conditions:default": [],
}) + select({
    _USING_ASAN: ["-fsanitize=address", "-fno-omit-frame-pointer"],
    # GCC leaves float-to-integer overflow out of -fsanitize=undefined; the
    # RoI kernels convert box positions to integers, so it is checked too.
    # GCC 12's null checks make absl's constant comparisons of function
    # addresses with null non-constant, so TensorFlow's headers do not
    # compile with them: those three checks are off.
    _USING_UBSAN: [
        "-fsanitize=undefined,float-cast-overflow",
        "-fno-sanitize=null,nonnull-attribute,returns-nonnull-attribute",
        "-fno-omit-frame-pointer",
    ],
    "//conditions:default": [],
})

# The glue: what includes TensorFlow's headers.
_HOST_COPTS = _TF_ABI_COPTS + _BASE_COPTS + [
    # TensorFlow's headers still use deprecated tsl::Status and tsl::mutex.
    "-Wno-deprecated-declarations",
] + _MODE_COPTS

_COPTS = _HOST_COPTS + select({
    _USING_CUDA: ["-DGOOGLE_CUDA=1"],
    "//conditions:default": [],
})

# The portable kernels (core/kernels/portable/api.h) sees Eigen and no TensorFlow
# header, so it is compiled once for every TensorFlow release; it exports its
# C interface only. TensorFlow aligns every buffer to 64 bytes, which the
# core's aligned Eigen maps assume.
_CORE_DEFINES = [
    "-std=c++17",
    "-DEIGEN_MAX_ALIGN_BYTES=64",
    "-DTFCO_PORTABLE",
]
_CORE_COPTS = _CORE_DEFINES + [
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
] + _BASE_COPTS + _MODE_COPTS + select({
    _USING_CUDA: ["-DGOOGLE_CUDA=1"],
    "//conditions:default": [],
})

# XLA's headers include highwayhash and farmhash by paths relative to these
# folders of TensorFlow's include tree. The lowerings include no CUDA header:
# their GPU custom calls hand XLA's stream to the portable kernels.
_XLA_INCLUDES = [
    "-isystem external/{repo}/include/external/highwayhash",
    "-isystem external/{repo}/include/external/farmhash_archive/src",
]
_XLA_COPTS = _HOST_COPTS + release_select(
    [flag.replace("{repo}", "local_config_tf") for flag in _XLA_INCLUDES],
    _XLA_INCLUDES,
    TF_RELEASES,
) + select({
    # The portable kernels have CUDA kernels, which the custom calls may run.
    _USING_CUDA: ["-DTFCO_CUDA=1"],
    "//conditions:default": [],
})

# Every shared library the wheel holds imports no libstdc++ symbol newer than
# GLIBCXX_3.4.21 (core/platform/libstdcxx_compat.cc says how and why).
_LIBSTDCXX_COMPAT = "//tensorflow_customops/core/platform:libstdcxx_compat"
_LIBSTDCXX_COMPAT_LINKOPTS = ["-Wl,--wrap=" + symbol for symbol in [
    "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE",
    "_ZSt28__throw_bad_array_new_lengthv",
    "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev",
]] + ["-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-Wl,--pop-state"]

_SANITIZER_LINKOPTS = select({
    _USING_ASAN: ["-fsanitize=address"],
    _USING_UBSAN: ["-fsanitize=undefined,float-cast-overflow"],
    "//conditions:default": [],
})

def _gencode_flags():
    flags = ["-gencode=arch=compute_%s,code=sm_%s" % (c, c) for c in CUDA_CAPABILITIES]
    if CUDA_CAPABILITIES:
        # PTX for the newest architecture, so newer GPUs can JIT-compile it.
        newest = CUDA_CAPABILITIES[-1]
        flags.append("-gencode=arch=compute_%s,code=compute_%s" % (newest, newest))
    return flags

def _clang_cuda_arch_flags():
    """The CUDA 12 route's code: a cubin for every capability, as nvcc's, and
    PTX for the newest only (clang writes PTX for every one by default)."""
    flags = ["--cuda-gpu-arch=sm_" + c for c in CLANG_CUDA_CAPABILITIES]
    if CLANG_CUDA_CAPABILITIES:
        flags += ["--no-cuda-include-ptx=all", "--cuda-include-ptx=sm_" + CLANG_CUDA_CAPABILITIES[-1]]
    return flags

def _cuda_code_lines(capabilities):
    return [
        "#define TFCO_CUDA_SASS " + ", ".join(capabilities),
        "#define TFCO_CUDA_PTX " + (capabilities[-1] if capabilities else "0"),
    ]

def tfco_cuda_code_header(name, out):
    """Generates the header that tells the portable kernels which code the CUDA
    compiler wrote for it (_gencode_flags, _clang_cuda_arch_flags):
    TFCO_CUDA_SASS, the architectures of its cubins (75 for sm_75), and
    TFCO_CUDA_PTX, its PTX's (0 for none).

    Args:
      name: target name.
      out: the generated header.
    """
    guard = "TFCO_CUDA_CODE_H_"
    native.genrule(
        name = name,
        outs = [out],
        cmd = "cat > $@ <<'EOF'\n" + "\n".join([
            "// Generated by Bazel (tfco_cuda_code_header).",
            "#ifndef " + guard,
            "#define " + guard,
        ]) + "\n" + select({
            _USING_CUDA12: "\n".join(_cuda_code_lines(CLANG_CUDA_CAPABILITIES)),
            "//conditions:default": "\n".join(_cuda_code_lines(CUDA_CAPABILITIES)),
        }) + "\n#endif\nEOF",
    )

def _nvcc_command(src):
    if not NVCC_PATH:
        return ("echo 'nvcc was not found when tools/configure.py ran; install the CUDA " +
                "toolkit and re-run it to build with --config=cuda.' >&2; exit 1")
    return " ".join([
        NVCC_PATH,
        "-c -x cu -O3 -DNDEBUG -DGOOGLE_CUDA=1",
        " ".join(_CORE_DEFINES),
        "--expt-relaxed-constexpr",
        "-Xcompiler -fPIC,-fvisibility=hidden,-fvisibility-inlines-hidden",
        "-Wno-deprecated-gpu-targets",
        "-Xcudafe --diag_suppress=esa_on_defaulted_function_ignored",
        "-isystem external/local_config_tf/eigen",
        "-I. -I$(GENDIR)",
        " ".join(_gencode_flags()),
        "-o $@ $(location %s)" % src,
    ])

_CLANG_CUDA_COMPAT = "//tensorflow_customops/core/platform:clang_cuda_compat.h"

def _clang_cuda_command(src):
    """The CUDA 12 route: clang 16 compiles device and host code against the
    CUDA 12.9 toolkit tools/configure.py laid out; the fatbinary there packs
    the cubins. clang's PTX is of an older ISA than CUDA 12.9's (it names its
    CUDA release, TFCO_PTX_CUDA_VERSION, for the driver check)."""
    if not CLANG_CUDA_PATH:
        return ("echo 'clang 16 or the CUDA 12 wheels were not found when tools/configure.py " +
                "ran; run tools/setup.sh to build with --config=cuda12.' >&2; exit 1")
    return " ".join([
        CLANG_CUDA_PATH,
        "-c -x cuda -O3 -DNDEBUG -DGOOGLE_CUDA=1",
        " ".join(_CORE_DEFINES),
        "-DTFCO_PTX_CUDA_VERSION=%d" % CLANG_CUDA_PTX_VERSION,
        "--cuda-path=" + CLANG_CUDA_TOOLKIT_PATH,
        # CUDA 12.9 is newer than clang 16 knows; it compiles as for 11.8.
        "-Wno-unknown-cuda-version",
        "-include $(location %s)" % _CLANG_CUDA_COMPAT,
        "-fPIC -fvisibility=hidden -fvisibility-inlines-hidden",
        "-isystem external/local_config_tf/eigen",
        "-I. -I$(GENDIR)",
        " ".join(_clang_cuda_arch_flags()),
        "-o $@ $(location %s)" % src,
    ])

def _nvcc_objects(name, gpu_srcs, hdrs):
    """One genrule per .cu.cc file of the portable kernels, compiled by nvcc
    (--config=cuda) or clang 16 (--config=cuda12); built only when --config
    needs it."""
    objects = []
    for src in gpu_srcs:
        obj = "%s_%s.o" % (name, src.replace("/", "_").replace(".cu.cc", ""))
        native.genrule(
            name = obj.replace(".", "_"),
            srcs = [src] + hdrs + ["@local_config_tf//:eigen_headers"] + select({
                _USING_CUDA12: [_CLANG_CUDA_COMPAT],
                "//conditions:default": [],
            }),
            outs = [obj],
            cmd = select({
                _USING_CUDA12: _clang_cuda_command(src),
                "//conditions:default": _nvcc_command(src),
            }),
            # Left out of `//...` unless --config=cuda selects it.
            tags = ["manual"],
            message = "CUDA " + src,
        )
        objects.append(obj)
    return objects

# The layer a file's name puts it in (CONTRIBUTING.md, "Layers"): in a family
# folder, <op>_op.cc and <family>_glue.{h,cc} are the glue; <op>_op_cpu.cc,
# <op>_op_gpu.cu.cc and <op>_op_entry.cc the portable kernels.
_GLUE_SUFFIXES = ("_op.cc", "_glue.h", "_glue.cc")
_PORTABLE_SUFFIXES = ("_op_cpu.cc", "_op_gpu.cu.cc", "_op_entry.cc")

def _check_layer(macro, files, wrong_suffixes, layer):
    for f in files:
        if type(f) == "string" and f.endswith(wrong_suffixes):
            fail("%s: %s is named as %s code (CONTRIBUTING.md, \"Layers\"); " % (macro, f, layer) +
                 "rename it or use the other layer's macro")

def tfco_cc_library(name, srcs = [], hdrs = [], deps = [], **kwargs):
    """Glue: op specs, gradients, OpKernels, or code they share. Compiled
    against the configured TensorFlow's headers.

    Args:
      name: target name.
      srcs: C++ sources.
      hdrs: headers.
      deps: other tfco_cc_library targets, or kernel-core headers
        (tfco_portable_library's name + "_api").
      **kwargs: passed to cc_library (visibility, ...).
    """
    _check_layer("tfco_cc_library", srcs + hdrs, _PORTABLE_SUFFIXES, "portable kernel")
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        copts = _COPTS,
        deps = deps + [_TF_HEADERS] + select({
            _USING_CUDA: [_TF_CUDA_HEADERS],
            "//conditions:default": [],
        }),
        # Op and kernel registrations run from static initialisers.
        alwayslink = 1,
        **kwargs
    )

def tfco_portable_library(name, srcs = [], hdrs = [], gpu_srcs = [], api_hdrs = [], deps = []):
    """Portable kernels: CPU and CUDA kernels that include no TensorFlow header
    (core/kernels/portable/api.h), compiled once for every TensorFlow release.

    Also defines name + "_api", the headers in api_hdrs alone, which is what
    the glue may depend on: the core's code reaches it through the shared
    portable kernels library only.

    Args:
      name: target name.
      srcs: C++ sources compiled by the host compiler.
      hdrs: headers, shared by the CPU and GPU sources.
      gpu_srcs: *_gpu.cu.cc files, compiled by nvcc under --config=cuda only.
      api_hdrs: the headers of hdrs that declare the core's C interface.
      deps: other tfco_portable_library targets (their headers reach nvcc too).
    """
    _check_layer("tfco_portable_library", srcs + hdrs + gpu_srcs, _GLUE_SUFFIXES, "glue")
    native.filegroup(
        name = name + "_hdrs",
        srcs = hdrs + [dep + "_hdrs" for dep in deps],
    )
    gpu_objects = _nvcc_objects(name, gpu_srcs, [name + "_hdrs"]) if gpu_srcs else []
    native.cc_library(
        name = name,
        srcs = srcs + select({
            _USING_CUDA: gpu_objects,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        copts = _CORE_COPTS,
        # The CUDA runtime, linked statically, with any GPU code.
        deps = deps + [_EIGEN_HEADERS] + (select({
            _USING_CUDA: [_CUDART],
            "//conditions:default": [],
        }) if gpu_srcs else []),
        alwayslink = 1,
    )
    native.cc_library(
        name = name + "_api",
        hdrs = api_hdrs,
        deps = [dep + "_api" for dep in deps],
    )

def tfco_kernel_library(name, srcs = [], hdrs = [], deps = [], glue_deps = [], functors = True):
    """An op's kernels, in five files (CONTRIBUTING.md, "Layers"):
      name.h            the portable entry points and (portable only) the functor
      name_entry.cc     the entry points, which pick the functor by the device
      name_cpu.cc       the CPU functor (portable kernels)
      name_gpu.cu.cc    the GPU functor (portable kernels)
      name.cc           the OpKernels and their registrations (glue)
    Defines name + "_core" (tfco_portable_library) and name (the glue).

    Args:
      name: the file stem, e.g. "zero_out_op".
      srcs: further portable sources.
      hdrs: further portable headers.
      deps: further tfco_portable_library targets (portable:device is always one).
      glue_deps: further tfco_cc_library targets of the glue.
      functors: False for an op whose entry point runs one loop on the host
        on every device (values in host memory): no name_cpu.cc and no
        name_gpu.cu.cc.
    """
    tfco_portable_library(
        name = name + "_core",
        srcs = [name + "_entry.cc"] + ([name + "_cpu.cc"] if functors else []) + srcs,
        hdrs = [name + ".h"] + hdrs,
        gpu_srcs = [name + "_gpu.cu.cc"] if functors else [],
        api_hdrs = [name + ".h"],
        deps = [_KERNELS + "portable:device"] + deps,
    )
    tfco_cc_library(
        name = name,
        srcs = [name + ".cc"],
        deps = [
            _KERNELS + "glue:portable_call",
            _KERNELS + "glue:register_kernel",
            name + "_core_api",
        ] + glue_deps,
    )

def tfco_portable_op_library(name, deps):
    """The portable kernels as the shared library the op library links
    (_portable_kernels.so): only its C interface is exported, it links no
    TensorFlow library, and under --config=cuda it carries the CUDA runtime,
    linked statically and kept private.

    Args:
      name: the .so file name (also its SONAME).
      deps: tfco_portable_library targets.
    """
    native.cc_binary(
        name = name,
        linkshared = 1,
        deps = deps + [_LIBSTDCXX_COMPAT],
        additional_linker_inputs = [_CORE_EXPORTS],
        linkopts = [
            "-Wl,-soname," + name,
            "-Wl,--no-undefined",
            "-Wl,--version-script,$(location %s)" % _CORE_EXPORTS,
        ] + _LIBSTDCXX_COMPAT_LINKOPTS + _SANITIZER_LINKOPTS,
    )

def _empty_library(name, soname):
    """An empty shared library named soname: what a glue built for another
    TensorFlow release links in place of a library it must NEED but that is
    not here (or would have to be built again in that configuration)."""
    native.genrule(
        name = name,
        outs = [name + ".so"],
        cmd = "echo | $(CC) -x c -shared -nostdlib -Wl,-soname,%s -o $@ -" % soname,
        toolchains = ["@bazel_tools//tools/cpp:current_cc_toolchain"],
    )

# Libraries linked by path ahead of the glue's objects. The installed
# TensorFlow's are real and every symbol must resolve; a release's are empty
# stand-ins (kept as NEEDED entries), whose imports tfco_release_glues checks
# against the names that release exports.
def _linked_libraries(installed, other_releases):
    return release_select(
        ["$(location %s)" % lib for lib in installed] + ["-Wl,--no-undefined"],
        ["-Wl,--no-as-needed"] + ["$(location %s)" % lib for lib in other_releases] +
        ["-Wl,--as-needed"],
        TF_RELEASES,
    )

def tfco_custom_op_library(name, deps, portable, **kwargs):
    """The shared library that tf.load_op_library loads: the glue.

    It links against libtensorflow_framework by path, so it carries no
    build-tree rpath, and against the portable kernels (`portable`), which it finds
    beside itself ($ORIGIN) or, as a release's glue in the wheel, in the
    folder above ($ORIGIN/..).

    Args:
      name: the .so file name.
      deps: tfco_cc_library targets.
      portable: the tfco_portable_op_library target in the same package.
      **kwargs: passed to cc_binary (visibility, ...).
    """
    portable_stub = name.replace(".", "_") + "_portable_stub"
    _empty_library(portable_stub, portable.split(":")[-1])
    native.cc_binary(
        name = name,
        linkshared = 1,
        deps = deps + [_LIBSTDCXX_COMPAT],
        # Whatever runs the op library from Bazel's runfiles gets the portable
        # kernels beside it. A release's glue links a stand-in, so that they are
        # built once, in the installed TensorFlow's configuration.
        data = release_select([portable], [], TF_RELEASES),
        additional_linker_inputs = [_TF_FRAMEWORK] + release_select([portable], [portable_stub], TF_RELEASES),
        linkopts = _linked_libraries([_TF_FRAMEWORK, portable], [_TF_FRAMEWORK, portable_stub]) + [
            "-Wl,-rpath,$$ORIGIN:$$ORIGIN/..",
        ] + _LIBSTDCXX_COMPAT_LINKOPTS + _SANITIZER_LINKOPTS,
        **kwargs
    )

def tfco_xla_library(name, srcs = [], hdrs = [], deps = []):
    """XLA lowerings (XlaOpKernel subclasses) or code they share.

    Args:
      name: target name.
      srcs: C++ sources.
      hdrs: headers.
      deps: tfco_cc_library or tfco_xla_library targets without kernel or op
        registrations (those live in the op library only).
    """
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        copts = _XLA_COPTS,
        deps = deps + [_TF_HEADERS],
        # REGISTER_XLA_OP runs from static initialisers.
        alwayslink = 1,
    )

def tfco_xla_op_library(name, deps, portable):
    """The shared library of XLA lowerings, loaded after the op library.

    XLA's op registry lives in libtensorflow_cc, so unlike the op library this
    one links it too (by path, without an rpath, like the op library). Its
    custom calls run the portable kernels, which it links as the op library does.

    Args:
      name: the .so file name.
      deps: tfco_xla_library targets.
      portable: the tfco_portable_op_library target in the same package.
    """
    portable_stub = name.replace(".", "_") + "_portable_stub"
    _empty_library(portable_stub, portable.split(":")[-1])
    native.cc_binary(
        name = name,
        linkshared = 1,
        deps = deps + [_LIBSTDCXX_COMPAT],
        data = release_select([portable], [], TF_RELEASES),
        additional_linker_inputs = [_TF_FRAMEWORK, _TF_CC] +
                                   release_select([portable], [portable_stub], TF_RELEASES),
        linkopts = _linked_libraries(
            [_TF_FRAMEWORK, _TF_CC, portable],
            [_TF_FRAMEWORK, _TF_CC, portable_stub],
        ) + [
            "-Wl,-rpath,$$ORIGIN:$$ORIGIN/..",
        ] + _LIBSTDCXX_COMPAT_LINKOPTS + _SANITIZER_LINKOPTS,
        target_compatible_with = [] if TF_CC_LIBRARY_NAME else ["@platforms//:incompatible"],
    )

def tfco_with_xla(items):
    """`items` unless the XLA library is left out (--config=noxla, or a
    TensorFlow without libtensorflow_cc)."""
    if not TF_CC_LIBRARY_NAME:
        return []
    return select({
        _NO_XLA: [],
        "//conditions:default": items,
    })

# Tests and tools find the framework library through an rpath to the
# installed TensorFlow: acceptable for them, never used for the op library.
# `tf_cc` links libtensorflow_cc too, which holds TensorFlow's C API.
def _framework_linked(rule, deps, tf_cc = False, **kwargs):
    libraries = [_TF_FRAMEWORK] + ([_TF_CC] if tf_cc else [])
    rule(
        # Linked statically: the portable kernels' symbols are hidden, so its
        # libraries cannot be linked as shared objects (Bazel's default for
        # tests).
        linkstatic = 1,
        copts = _COPTS,
        deps = deps + [_TF_HEADERS],
        additional_linker_inputs = libraries,
        linkopts = ["$(location %s)" % lib for lib in libraries] + [
            "-Wl,-rpath," + TF_SHARED_LIBRARY_DIR,
        ] + _SANITIZER_LINKOPTS,
        target_compatible_with = (
            [] if TF_CC_LIBRARY_NAME or not tf_cc else ["@platforms//:incompatible"]
        ),
        **kwargs
    )

def tfco_cc_test(name, srcs, deps = [], size = "small", **kwargs):
    """A C++ test linked against TensorFlow's framework library.

    Args:
      name: test name.
      srcs: C++ sources with a main().
      deps: tfco_cc_library targets under test.
      size: Bazel test size.
      **kwargs: passed to cc_test (args, data, ...).
    """
    _framework_linked(native.cc_test, deps, name = name, srcs = srcs, size = size, **kwargs)

def tfco_cc_binary(name, srcs, deps = [], tf_cc = False, **kwargs):
    """A C++ tool linked against TensorFlow's framework library.

    Args:
      name: binary name.
      srcs: C++ sources with a main().
      deps: tfco_cc_library targets.
      tf_cc: also link libtensorflow_cc, for TensorFlow's C API (sessions,
        SavedModels, TF_LoadLibrary).
      **kwargs: passed to cc_binary (args, data, ...).
    """
    _framework_linked(native.cc_binary, deps, tf_cc, name = name, srcs = srcs, **kwargs)

def tfco_cuda_binary(name, gpu_srcs, kernels, deps = [], **kwargs):
    """A CUDA program that runs the library's GPU kernels without TensorFlow.

    gpu_srcs are compiled by nvcc. Of each kernel only its portable part is
    linked, not the op registrations, so no TensorFlow library is needed;
    the CUDA runtime, libstdc++ and libgcc are linked statically, so the
    executable runs on any machine with an NVIDIA driver.
    It builds under --config=cuda only; elsewhere `//...` skips it.

    Args:
      name: binary name.
      gpu_srcs: *.cu.cc files with the program's host and device code.
      kernels: tfco_kernel_library names; their portable kernelss are linked.
      deps: host tfco_portable_library targets.
      **kwargs: passed to cc_binary (visibility, ...).
    """
    objects = _nvcc_objects(name, gpu_srcs, [t + "_core_hdrs" for t in kernels] + [t + "_hdrs" for t in deps])
    native.cc_binary(
        name = name,
        srcs = select({
            _USING_CUDA: objects,
            "//conditions:default": [],
        }),
        deps = [k + "_core" for k in kernels] + deps + select({
            _USING_CUDA: [_CUDART],
            "//conditions:default": [],
        }),
        # Bazel's toolchain adds a plain -lstdc++ (so -static-libstdc++ has no
        # effect): link the archive first and drop the unneeded shared one.
        linkopts = [
            "-Wl,--as-needed",
            "-Wl,-Bstatic",
            "-lstdc++",
            "-Wl,-Bdynamic",
            "-static-libgcc",
        ],
        target_compatible_with = _CUDA_ONLY,
        **kwargs
    )

def tfco_py_test(name, srcs = None, deps = [], size = "small", cuda_only = False, **kwargs):
    """A Python test of the ops, run with the interpreter that has TensorFlow.

    Args:
      name: test name.
      srcs: test sources; [name + ".py"] by default.
      deps: py_library dependencies besides the package itself.
      size: Bazel test size.
      cuda_only: run under --config=cuda only (skipped elsewhere).
      **kwargs: passed to py_test (shard_count, tags, data, ...).
    """
    srcs = srcs or [name + ".py"]
    native.py_test(
        name = name,
        srcs = srcs,
        main = srcs[0] if len(srcs) == 1 else kwargs.pop("main"),
        python_version = "PY3",
        srcs_version = "PY3",
        size = size,
        deps = deps + ["//tensorflow_customops"],
        target_compatible_with = _CUDA_ONLY if cuda_only else [],
        **kwargs
    )

def tfco_build_info(name, out):
    """Generates the Python module that records how the op library was built.

    Args:
      name: target name.
      out: the generated .py file.
    """
    common = "\n".join([
        '"""How this copy of tensorflow_customops was built. Generated by Bazel."""',
        "",
        'TF_VERSION = "%s"' % TF_VERSION,
        "CXX11_ABI_FLAG = %d" % TF_CXX11_ABI_FLAG,
        'CXX_STANDARD = "%s"' % TF_CXX_STANDARD,
        "",
    ])
    cuda, cuda12 = [
        "CUDA = True\nCUDA_CAPABILITIES = %s\n" % repr(["sm_" + c for c in caps])
        for caps in (CUDA_CAPABILITIES, CLANG_CUDA_CAPABILITIES)
    ]
    no_cuda = "CUDA = False\nCUDA_CAPABILITIES = []\n"
    if TF_CC_LIBRARY_NAME:
        xla = select({_NO_XLA: "XLA = False\n", "//conditions:default": "XLA = True\n"})
    else:
        xla = "XLA = False\n"
    native.genrule(
        name = name,
        outs = [out],
        cmd = "cat > $@ <<'EOF'\n" + select({
            _USING_CUDA12: common + cuda12,
            _USING_CUDA: common + cuda,
            "//conditions:default": common + no_cuda,
        }) + xla + "EOF",
    )

def _release_split_impl(settings, attr):
    wanted = [r for r in settings[_WHEEL_RELEASES].split(",") if r]
    wrong = [r for r in wanted if r not in TF_RELEASES or r == INSTALLED_RELEASE]
    if wrong:
        fail("--%s=%s: it lists releases besides the installed TensorFlow (%s), from %s" % (
            _WHEEL_RELEASES,
            ",".join(wanted),
            INSTALLED_RELEASE,
            ", ".join(TF_RELEASES),
        ))

    # A split needs a branch even without other releases: one whose targets
    # are analysed (like the installed TensorFlow's, in an output directory
    # of their own) but never built.
    return {r: {_RELEASE: r} for r in wanted} or {"": {_RELEASE: "unused"}}

_release_split = transition(
    implementation = _release_split_impl,
    inputs = [_WHEEL_RELEASES],
    outputs = [_RELEASE],
)

def _release_glues_impl(ctx):
    outs = []
    releases = {INSTALLED_RELEASE: (ctx.attr.installed_libs, ctx.attr.installed_exports)}
    for release, libs in ctx.split_attr.libs.items():
        if release:
            releases[release] = (libs, ctx.split_attr.exports[release])
    for release, (libs, exports) in releases.items():
        export_files = [f for target in exports for f in target.files.to_list()]
        for lib in [f for target in libs for f in target.files.to_list()]:
            out = ctx.actions.declare_file("tf%s/%s" % (release.replace(".", "_"), lib.basename))
            ctx.actions.run(
                executable = PYTHON_BIN_PATH,
                arguments = [ctx.file._check.path, lib.path, out.path] + [f.path for f in export_files],
                inputs = [ctx.file._check, lib] + export_files,
                outputs = [out],
                mnemonic = "TfcoCheckGlue",
                progress_message = "Checking the TensorFlow %s glue %s" % (release, lib.basename),
            )
            outs.append(out)
    return [DefaultInfo(files = depset(outs), runfiles = ctx.runfiles(outs))]

_release_glues = rule(
    implementation = _release_glues_impl,
    attrs = {
        "libs": attr.label_list(cfg = _release_split),
        "exports": attr.label_list(cfg = _release_split),
        "installed_libs": attr.label_list(),
        "installed_exports": attr.label_list(),
        "_check": attr.label(
            default = "//tools/pip_package:check_glue_imports.py",
            allow_single_file = True,
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)

def tfco_release_glues(name, libs):
    """The glue libraries `libs` for every TensorFlow release the wheel
    carries, each in a folder tfM_N beside the portable kernels: the installed
    TensorFlow's, and those of the releases named by
    --//third_party/tf:wheel_releases=2.12,2.13,... (built with their cached
    headers). Every glue's TensorFlow imports are checked against what its
    release exports.

    Args:
      name: target name.
      libs: the tfco_custom_op_library and tfco_xla_op_library targets.
    """
    _release_glues(
        name = name,
        libs = libs,
        exports = [_TF_EXPORTS],
        installed_libs = libs,
        installed_exports = [_TF_EXPORTS],
    )

_CUDART_ARCHIVE = "@local_config_tf//:cudart_static_archive"
_CUDART_CUDA12_ARCHIVE = "@local_config_tf//:cudart_static_archive_cuda12"

def tfco_cudart_library(name, **kwargs):
    """The CUDA runtime (nvcc's, or CUDA 12.9's under --config=cuda12), linked statically, with its calls into glibc bound
    to versions glibc 2.17 has (tools/glibc_compat.py says why), so that the
    portable kernels keep the glibc floor of the rest of the wheel.

    Args:
      name: target name.
      **kwargs: passed to cc_library (visibility, ...).
    """
    native.genrule(
        name = name + "_glibc_compat",
        srcs = select({
            _USING_CUDA12: [_CUDART_CUDA12_ARCHIVE],
            "//conditions:default": [_CUDART_ARCHIVE],
        }),
        outs = [name + "_glibc_compat.a", name + "_glibc_compat.S"],
        cmd = " ".join([
            PYTHON_BIN_PATH,
            "$(location //tools:glibc_compat.py)",
            "$(SRCS)",
            "$$($(CC) -print-file-name=libc.so.6)",
            "2.17",
            "$(location %s_glibc_compat.a) $(location %s_glibc_compat.S)" % (name, name),
        ]),
        tools = ["//tools:glibc_compat.py"],
        toolchains = ["@bazel_tools//tools/cpp:current_cc_toolchain"],
        tags = ["manual"],
    )
    native.cc_library(
        name = name,
        srcs = [name + "_glibc_compat.a", name + "_glibc_compat.S"],
        # On a glibc older than 2.34 the rebound functions live in these.
        linkopts = [
            "-Wl,--push-state,--no-as-needed",
            "-l:libpthread.so.0",
            "-l:libdl.so.2",
            "-l:librt.so.1",
            "-Wl,--pop-state",
        ],
        alwayslink = 1,
        target_compatible_with = _CUDA_ONLY,
        **kwargs
    )
