"""The GPU check's cases, one module per op family (`<family>.py`, the
family's name in ops.bzl), which all_cases() finds by itself: a new family's
cases are a new module here. A family module has

  cases()        the family's cases (a list of case_file.Case);
  NO_GPU_CODE    optional, {op name without prefix: why}: the family's ops
                 whose GPU kernels run no GPU code, so they have no case;
  FIXED_DTYPE_INPUTS
                 optional, names of inputs whose dtype is not the op's dtype
                 under test (indices, boxes of a dtype of their own);
  check_cases(test, cases)
                 optional, the family's own assertions on its cases (that the
                 hard inputs are there), run by make_cases_test.

What they share is below: the dtypes, each case's tolerance, and the
conversion to the case file's tensors.

Every functor with a GPU kernel gets cases in every dtype its GPU kernel is
built for. The expected outputs come from this library's CPU kernels, which
are bitwise deterministic, so the file is the same byte for byte each time it
is written.

Each case carries its tolerance, |gpu - cpu| <= atol + rtol * |cpu| per
element, with NaN only where the CPU has NaN and infinities equal (see
TOLERANCES; exact where both kernels do the same operations).
"""

import importlib
import pkgutil

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tools.gpu_check import case_file

ops = load_library.load_op_library()

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

TF_DTYPES = {
    "float16": tf.float16,
    "bfloat16": tf.bfloat16,
    "float32": tf.float32,
    "float64": tf.float64,
    "int32": tf.int32,
    "int64": tf.int64,
    "int8": tf.int8,
    "uint8": tf.uint8,
}

# (rtol, atol as a fraction of the largest expected magnitude) by kind:
#  - "sum": float sums in another order or with fused multiply-adds (nvcc
#    contracts a * b + c, the CPU kernels do not): a few units in the last
#    place of the accumulator, and one rounding step of half and bfloat16
#    outputs (2^-10 and 2^-7 relative, so two steps are allowed). Fused
#    arithmetic also moves an interpolating kernel's sample positions by an
#    ulp of the coordinate, which changes a sample by that much times the
#    local slope of the input: hence atol of 1e-5 of the output's scale in
#    float32.
#  - "atomic": the GPU backward passes add into the feature gradient with
#    atomics in the gradient's own dtype, so half and bfloat16 gradients
#    round after every contribution where the CPU rounds once.
#  - "exact": both kernels do the same operations (selection, copies, flags,
#    a double-precision norm rounded once).
TOLERANCES = {
    "sum": {
        "float16": (2e-3, 1e-3),
        "bfloat16": (1.6e-2, 8e-3),
        "float32": (1e-5, 1e-5),
        "float64": (1e-12, 1e-12),
    },
    "atomic": {
        "float16": (2e-2, 1e-2),
        "bfloat16": (1e-1, 5e-2),
        "float32": (1e-5, 1e-5),
        "float64": (1e-12, 1e-12),
    },
}


def tolerance(kind, dtype, outputs):
    if kind == "exact":
        return {"rtol": 0.0, "atol": 0.0}
    rtol, atol = TOLERANCES[kind][dtype]
    finite = [t.as_float64() for t in outputs.values()]
    finite = [np.abs(v[np.isfinite(v)]) for v in finite]
    scale = max([float(v.max()) for v in finite if v.size] + [0.0])
    return {"rtol": rtol, "atol": atol * scale}


def to_file(x, dtype):
    """A TensorFlow tensor or NumPy array as a case_file.Tensor of `dtype`."""
    x = tf.convert_to_tensor(x)
    if dtype == "bfloat16":
        return case_file.Tensor(
            dtype, case_file.bfloat16_bits(tf.cast(x, tf.float32).numpy())
        )
    return case_file.Tensor(dtype, tf.cast(x, TF_DTYPES[dtype]).numpy())


def normal(rng, shape, dtype):
    """Random values rounded to `dtype`, as a TensorFlow tensor."""
    return tf.cast(rng.standard_normal(shape), TF_DTYPES[dtype])


def case(name, op, attrs, inputs, outputs, kind, dtype):
    """A case whose tensors are (value, dtype) pairs."""
    inputs = {k: to_file(v, t) for k, (v, t) in inputs.items()}
    outputs = {k: to_file(v, t) for k, (v, t) in outputs.items()}
    attrs = dict(attrs, **tolerance(kind, dtype, outputs))
    return case_file.Case(name, op, attrs, inputs, outputs)


def modules():
    """The family modules, in alphabetical order."""
    return [
        importlib.import_module(f"{__name__}.{name}")
        for name in sorted(m.name for m in pkgutil.iter_modules(__path__))
    ]


def no_gpu_code():
    """{op name without prefix: why} of every family's NO_GPU_CODE."""
    found = {}
    for module in modules():
        found.update(getattr(module, "NO_GPU_CODE", {}))
    return found


def all_cases():
    """Every family module's cases, in the modules' alphabetical order."""
    cases = []
    with tf.device("/CPU:0"):
        for module in modules():
            cases += module.cases()
    return cases
