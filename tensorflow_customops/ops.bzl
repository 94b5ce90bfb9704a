"""The op families of this repository: the one table the build reads them from.

A family `f` has core/ops/f_ops.cc and f_grad.cc, its kernels in
core/kernels/f/ (the kernel libraries listed here), its XLA lowerings in
compiler/tf2xla/kernels/f/ and python/ops/f_ops.py; the BUILD files that
build, load and package them read this table, so a new family is one line
here (tools/new_op.py writes it) plus its folders.
"""

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

# Python packages of the library besides its families' modules (python/ops)
# and the machinery's: each has a py_library named for its folder and a
# filegroup, pip_files, of what goes into the wheel.
TFCO_PYTHON_PACKAGES = ["//tensorflow_customops/python/keras"]

# Further dependencies of a family's shape functions (core/ops/<family>_ops).
TFCO_SHAPE_DEPS = {
    "deform_conv2d": ["//tensorflow_customops/core/kernels/deform_conv2d:deform_conv2d_shape"],
    "roi": ["//tensorflow_customops/core/kernels/roi:roi_shape"],
}

# Further dependencies of a family's GPU check cases (tools/gpu_check/cases/).
TFCO_GPU_CASE_DEPS = {
    "roi": ["//tensorflow_customops/python/kernel_tests/roi:roi_test_util"],
}

# The libraries of a family's XLA custom-call handlers, which register its
# CUDA handlers (compiler/tf2xla/ffi_handler.h) with no TensorFlow symbol:
# tools/gpu_check links them and calls each as XLA does.
TFCO_FFI_HANDLERS = {
    "deform_conv2d": ["//tensorflow_customops/compiler/tf2xla/kernels/deform_conv2d:deform_conv2d_custom_call_handlers"],
    "roi": ["//tensorflow_customops/compiler/tf2xla/kernels/roi:roi_custom_call_handlers"],
}
