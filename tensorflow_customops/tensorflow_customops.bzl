"""Build macros for tensorflow_customops. These own every compiler and linker flag.

  tfco_kernels           the labels of the kernel libraries of TFCO_OPS (ops.bzl)
  tfco_cc_library        op specs, gradients and kernels (CPU, and GPU under --config=cuda)
  tfco_portable_library  portable kernels: no TensorFlow header, built once
  tfco_kernel_library    one op's five kernel files (CONTRIBUTING.md, "Layers")
  tfco_portable_op_library  the shared library of the portable kernels
  tfco_custom_op_library the shared library Python loads
  tfco_xla_library       XLA lowerings (compiler/tf2xla)
  tfco_xla_op_library    the shared library of XLA lowerings Python loads second
  tfco_with_xla          a list that names the XLA library unless it is left out
  tfco_release_glues     the glue of every TensorFlow release the wheel carries
  tfco_cc_test           a C++ test of specs, shape functions and gradients
  tfco_cc_binary         a C++ tool linked against TensorFlow's framework library
                         (and its C API, with tf_cc)
  tfco_cuda_binary       a CUDA program of GPU kernels that needs no TensorFlow
  tfco_cudart_library    the CUDA runtime, linked statically
  tfco_cuda_emulation_runtime  the CPU emulation's CUDA runtime (--config=cuda_emulation)
  tfco_py_test           a Python test that uses the ops
  tfco_build_info        the module recording how the library was built
  tfco_cuda_code_header  the header naming the GPU code the CUDA compiler writes

They live in build_defs/ by subject (flags, CUDA, libraries, release glues,
tests); this file is the one BUILD files load. All values come from the
installed TensorFlow through tools/configure.py; see
third_party/tf/tf_configure.bzl.
"""

load(
    "//tensorflow_customops/build_defs:cuda.bzl",
    _tfco_cuda_binary = "tfco_cuda_binary",
    _tfco_cuda_code_header = "tfco_cuda_code_header",
    _tfco_cuda_emulation_runtime = "tfco_cuda_emulation_runtime",
    _tfco_cudart_library = "tfco_cudart_library",
)
load(
    "//tensorflow_customops/build_defs:libraries.bzl",
    _tfco_cc_library = "tfco_cc_library",
    _tfco_custom_op_library = "tfco_custom_op_library",
    _tfco_kernel_library = "tfco_kernel_library",
    _tfco_kernels = "tfco_kernels",
    _tfco_portable_library = "tfco_portable_library",
    _tfco_portable_op_library = "tfco_portable_op_library",
    _tfco_with_xla = "tfco_with_xla",
    _tfco_xla_library = "tfco_xla_library",
    _tfco_xla_op_library = "tfco_xla_op_library",
)
load(
    "//tensorflow_customops/build_defs:release_glues.bzl",
    _tfco_release_glues = "tfco_release_glues",
)
load(
    "//tensorflow_customops/build_defs:tests.bzl",
    _tfco_build_info = "tfco_build_info",
    _tfco_cc_binary = "tfco_cc_binary",
    _tfco_cc_test = "tfco_cc_test",
    _tfco_py_test = "tfco_py_test",
)

tfco_build_info = _tfco_build_info
tfco_cc_binary = _tfco_cc_binary
tfco_cc_library = _tfco_cc_library
tfco_cc_test = _tfco_cc_test
tfco_cuda_binary = _tfco_cuda_binary
tfco_cuda_code_header = _tfco_cuda_code_header
tfco_cuda_emulation_runtime = _tfco_cuda_emulation_runtime
tfco_cudart_library = _tfco_cudart_library
tfco_custom_op_library = _tfco_custom_op_library
tfco_kernel_library = _tfco_kernel_library
tfco_kernels = _tfco_kernels
tfco_portable_library = _tfco_portable_library
tfco_portable_op_library = _tfco_portable_op_library
tfco_py_test = _tfco_py_test
tfco_release_glues = _tfco_release_glues
tfco_with_xla = _tfco_with_xla
tfco_xla_library = _tfco_xla_library
tfco_xla_op_library = _tfco_xla_op_library
