"""Compiler and linker flags of every layer, and the build settings they
select on. Only the other files of this folder load it; BUILD files use their
macros."""

load("//third_party/tf:releases.bzl", "TF_RELEASES")
load("//third_party/tf:tf_release.bzl", "release_select")
load(
    "@local_config_tf//:build_defs.bzl",
    "TF_CXX11_ABI_FLAG",
    "TF_CXX_STANDARD",
    "TF_EIGEN_MAX_ALIGN_BYTES",
    "TF_VERSION",
)

USING_CUDA = "//tensorflow_customops:using_cuda"
USING_CUDA12 = "//tensorflow_customops:using_cuda12"
USING_CUDA_EMULATION = "//tensorflow_customops:using_cuda_emulation"
USING_CUDA_EMULATION_RACECHECK = "//tensorflow_customops:using_cuda_emulation_racecheck"
NO_XLA = "//tensorflow_customops:no_xla"
_USING_ASAN = "//tensorflow_customops:using_asan"
_USING_UBSAN = "//tensorflow_customops:using_ubsan"
_OPT = "//tensorflow_customops:opt"
# The glue's TensorFlow: the installed one, or the release a transition picks
# (third_party/tf/tf_release.bzl).
TF_HEADERS = "//third_party/tf:tf_header_lib"
TF_CUDA_HEADERS = "//third_party/tf:tf_cuda_header_lib"
TF_FRAMEWORK = "//third_party/tf:libtensorflow_framework"
TF_CC = "//third_party/tf:libtensorflow_cc"
TF_EXPORTS = "//third_party/tf:tf_exports"
RELEASE = "//third_party/tf:release"
WHEEL_RELEASES = "//third_party/tf:wheel_releases"
INSTALLED_RELEASE = ".".join(TF_VERSION.split(".")[:2])
EIGEN_HEADERS = "@local_config_tf//:eigen_header_lib"
KERNELS = "//tensorflow_customops/core/kernels/"
CORE_EXPORTS = KERNELS + "portable:exports.lds"
CUDART = "//tensorflow_customops/core/platform:cudart"
CUDA_ONLY = select({
    USING_CUDA: [],
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
    # GCC leaves float-to-integer overflow out of -fsanitize=undefined;
    # kernels that convert positions to integers need it checked too.
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

COPTS = _HOST_COPTS + select({
    USING_CUDA: ["-DGOOGLE_CUDA=1"],
    "//conditions:default": [],
})

# The portable kernels (core/kernels/portable/api.h) sees Eigen and no TensorFlow
# header, so it is compiled once for every TensorFlow release; it exports its
# C interface only. TensorFlow aligns every buffer to 64 bytes, which the
# core's aligned Eigen maps assume.
CORE_DEFINES = [
    "-std=c++17",
    "-DEIGEN_MAX_ALIGN_BYTES=64",
    "-DTFCO_PORTABLE",
]
CORE_COPTS = CORE_DEFINES + [
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
] + _BASE_COPTS + _MODE_COPTS + select({
    USING_CUDA: ["-DGOOGLE_CUDA=1"],
    "//conditions:default": [],
})

# XLA's headers include highwayhash and farmhash by paths relative to these
# folders of TensorFlow's include tree. The lowerings include no CUDA header:
# their GPU custom calls hand XLA's stream to the portable kernels.
_XLA_INCLUDES = [
    "-isystem external/{repo}/include/external/highwayhash",
    "-isystem external/{repo}/include/external/farmhash_archive/src",
]
XLA_COPTS = _HOST_COPTS + release_select(
    [flag.replace("{repo}", "local_config_tf") for flag in _XLA_INCLUDES],
    _XLA_INCLUDES,
    TF_RELEASES,
) + select({
    # The portable kernels have CUDA kernels, which the custom calls may run.
    USING_CUDA: ["-DTFCO_CUDA=1"],
    "//conditions:default": [],
})

# Every shared library the wheel holds imports no libstdc++ symbol newer than
# GLIBCXX_3.4.21 (core/platform/libstdcxx_compat.cc says how and why).
LIBSTDCXX_COMPAT = "//tensorflow_customops/core/platform:libstdcxx_compat"
LIBSTDCXX_COMPAT_LINKOPTS = ["-Wl,--wrap=" + symbol for symbol in [
    "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE",
    "_ZSt28__throw_bad_array_new_lengthv",
    "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev",
]] + ["-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-Wl,--pop-state"]

SANITIZER_LINKOPTS = select({
    _USING_ASAN: ["-fsanitize=address"],
    _USING_UBSAN: ["-fsanitize=undefined,float-cast-overflow"],
    "//conditions:default": [],
})
