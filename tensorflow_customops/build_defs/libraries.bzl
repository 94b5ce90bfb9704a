"""The libraries of an op library: glue, portable kernels and XLA lowerings,
and the shared libraries Python loads."""

load("//third_party/tf:releases.bzl", "TF_RELEASES")
load("//third_party/tf:tf_release.bzl", "release_select")
load("@local_config_tf//:build_defs.bzl", "TF_CC_LIBRARY_NAME")
load(
    "//tensorflow_customops/build_defs:flags.bzl",
    "COPTS",
    "CORE_COPTS",
    "CORE_EXPORTS",
    "CUDART",
    "EIGEN_HEADERS",
    "KERNELS",
    "LIBSTDCXX_COMPAT",
    "LIBSTDCXX_COMPAT_LINKOPTS",
    "NO_XLA",
    "SANITIZER_LINKOPTS",
    "TF_CC",
    "TF_CUDA_HEADERS",
    "TF_FRAMEWORK",
    "TF_HEADERS",
    "USING_CUDA",
    "XLA_COPTS",
)
load("//tensorflow_customops/build_defs:cuda.bzl", "nvcc_objects")
load("//tensorflow_customops:ops.bzl", "TFCO_OPS")

def tfco_kernels(suffix = ""):
    """The label of every kernel library in TFCO_OPS, plus `suffix`
    ("_core": its portable kernels)."""
    return [
        KERNELS + "%s:%s%s" % (family, kernel, suffix)
        for family, kernels in TFCO_OPS.items()
        for kernel in kernels
    ]

# The layer a file's name puts it in (CONTRIBUTING.md, "Layers"): in a family
# folder, <op>_op.cc, <family>_glue.{h,cc} and <family>_shape.{h,cc} are the
# glue; <op>_op_cpu.cc, <op>_op_gpu.cu.cc and <op>_op_entry.cc the portable
# kernels, and so is every other name there.
_GLUE_SUFFIXES = ("_op.cc", "_glue.h", "_glue.cc", "_shape.h", "_shape.cc")
_PORTABLE_SUFFIXES = ("_op_cpu.cc", "_op_gpu.cu.cc", "_op_entry.cc")

def _check_layer(macro, files, wrong_suffixes, layer):
    for f in files:
        if type(f) == "string" and f.endswith(wrong_suffixes):
            fail("%s: %s is named as %s code (CONTRIBUTING.md, \"Layers\"); " % (macro, f, layer) +
                 "rename it or use the other layer's macro")

def _in_family_folder():
    # core/kernels/<family>; glue/ and portable/ say their layer by folder.
    parts = native.package_name().split("/")
    return (len(parts) == 4 and parts[1:3] == ["core", "kernels"] and
            parts[3] not in ("glue", "portable"))

def _check_glue_names(macro, files):
    for f in files:
        if type(f) == "string" and not f.endswith(_GLUE_SUFFIXES):
            fail("%s: %s is named as portable kernel code (CONTRIBUTING.md, \"Layers\"): " % (macro, f) +
                 "name a family's glue <op>_op.cc, <family>_glue.{h,cc} or <family>_shape.{h,cc}")

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
    if _in_family_folder():
        _check_glue_names("tfco_cc_library", srcs + hdrs)
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        copts = COPTS,
        deps = deps + [TF_HEADERS] + select({
            USING_CUDA: [TF_CUDA_HEADERS],
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
    gpu_objects = nvcc_objects(name, gpu_srcs, [name + "_hdrs"]) if gpu_srcs else []
    native.cc_library(
        name = name,
        srcs = srcs + select({
            USING_CUDA: gpu_objects,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        copts = CORE_COPTS,
        # The CUDA runtime, linked statically, with any GPU code.
        deps = deps + [EIGEN_HEADERS] + (select({
            USING_CUDA: [CUDART],
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
      name: the file stem, e.g. "foo_op".
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
        deps = [KERNELS + "portable:device"] + deps,
    )
    tfco_cc_library(
        name = name,
        srcs = [name + ".cc"],
        deps = [
            KERNELS + "glue:portable_call",
            KERNELS + "glue:register_kernel",
            name + "_core_api",
        ] + glue_deps,
    )

def tfco_portable_op_library(name, deps):
    """The portable kernels as the shared library the op library links
    (_<package>_portable_kernels.so): only its C interface is exported, it
    links no TensorFlow library, and under --config=cuda it carries the CUDA
    runtime, linked statically and kept private.

    Args:
      name: the .so file name (also its SONAME, which the glue NEEDs). It
        carries the package's name: the dynamic loader gives a NEEDED name
        the library of that SONAME if one is loaded, so two packages in one
        process would otherwise share the first one's.
      deps: tfco_portable_library targets.
    """
    native.cc_binary(
        name = name,
        linkshared = 1,
        deps = deps + [LIBSTDCXX_COMPAT],
        additional_linker_inputs = [CORE_EXPORTS],
        linkopts = [
            "-Wl,-soname," + name,
            "-Wl,--no-undefined",
            "-Wl,--version-script,$(location %s)" % CORE_EXPORTS,
        ] + LIBSTDCXX_COMPAT_LINKOPTS + SANITIZER_LINKOPTS,
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
        deps = deps + [LIBSTDCXX_COMPAT],
        # Whatever runs the op library from Bazel's runfiles gets the portable
        # kernels beside it. A release's glue links a stand-in, so that they are
        # built once, in the installed TensorFlow's configuration.
        data = release_select([portable], [], TF_RELEASES),
        additional_linker_inputs = [TF_FRAMEWORK] + release_select([portable], [portable_stub], TF_RELEASES),
        linkopts = _linked_libraries([TF_FRAMEWORK, portable], [TF_FRAMEWORK, portable_stub]) + [
            "-Wl,-rpath,$$ORIGIN:$$ORIGIN/..",
        ] + LIBSTDCXX_COMPAT_LINKOPTS + SANITIZER_LINKOPTS,
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
        copts = XLA_COPTS,
        deps = deps + [TF_HEADERS],
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
        deps = deps + [LIBSTDCXX_COMPAT],
        data = release_select([portable], [], TF_RELEASES),
        additional_linker_inputs = [TF_FRAMEWORK, TF_CC] +
                                   release_select([portable], [portable_stub], TF_RELEASES),
        linkopts = _linked_libraries(
            [TF_FRAMEWORK, TF_CC, portable],
            [TF_FRAMEWORK, TF_CC, portable_stub],
        ) + [
            "-Wl,-rpath,$$ORIGIN:$$ORIGIN/..",
        ] + LIBSTDCXX_COMPAT_LINKOPTS + SANITIZER_LINKOPTS,
        target_compatible_with = [] if TF_CC_LIBRARY_NAME else ["@platforms//:incompatible"],
    )

def tfco_with_xla(items):
    """`items` unless the XLA library is left out (--config=noxla, or a
    TensorFlow without libtensorflow_cc)."""
    if not TF_CC_LIBRARY_NAME:
        return []
    return select({
        NO_XLA: [],
        "//conditions:default": items,
    })
