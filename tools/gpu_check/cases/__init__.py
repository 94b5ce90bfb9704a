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
import re

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


# HLO's element types, as case dtypes.
_HLO_DTYPES = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "s32": "int32",
    "s64": "int64",
    "s8": "int8",
    "u8": "uint8",
}
_HLO_SHAPE = re.compile(rf"\b({'|'.join(_HLO_DTYPES)})\[([0-9,]*)\]")
# The typed-FFI attributes the lowerings write (FfiAttributes): i64 arrays,
# f32 scalars (as the bits in hexadecimal, or as a decimal).
_FFI_ATTR = re.compile(
    r"(\w+) = (?:array<i64(?::\s*([-0-9, ]*))?>"
    r"|(0x[0-9A-Fa-f]{8}|[-+0-9.eE]+|nan|[-+]?inf) : f32)"
)


def _hlo_shapes(text):
    return [
        (_HLO_DTYPES[t], tuple(int(d) for d in dims.split(",") if d))
        for t, dims in _HLO_SHAPE.findall(text)
    ]


def xla_custom_call(fn, *args):
    """The one custom call that `fn`, compiled by XLA for the CPU, makes, as
    XLA passes it to its handler: (target, operands, results, attributes),
    operands and results as (dtype, dims), attributes {name: value} as the
    handler decodes them (a list of ints, or a float)."""
    compiled = tf.function(fn, jit_compile=True, autograph=False)
    hlo = compiled.experimental_get_compiler_ir(*args)(stage="hlo")
    calls = [line for line in hlo.splitlines() if " custom-call(" in line]
    if len(calls) != 1:
        raise ValueError(f"expected one custom call, found {len(calls)}:\n{hlo}")
    results, rest = calls[0].split("=", 1)[1].split(" custom-call(", 1)
    operands, rest = rest.split("), custom_call_target=", 1)
    target = re.match(r'"([^"]+)"', rest).group(1)
    config = rest.split("backend_config=", 1)[1] if "backend_config=" in rest else ""
    attrs = {}
    for name, ints, value in _FFI_ATTR.findall(config):
        if value.startswith("0x"):
            bits = np.array([int(value, 16)], np.uint32)
            attrs[name] = float(bits.view(np.float32)[0])
        elif value:
            attrs[name] = float(np.float32(value))
        else:
            attrs[name] = [int(v) for v in ints.split(",") if v.strip()]
    return target, _hlo_shapes(operands), _hlo_shapes(results), attrs


def xla_case(name, fn, args, operands, results, kind, dtype):
    """A case of the custom call that fn(*args) makes compiled by XLA, run on
    the GPU through the target's CUDA handler as XLA runs it: op
    "xla:<target>", the attributes XLA passes (xla_custom_call, as
    "ffi.i64s.<name>" with its elements "ffi.i64s.<name>.<i>", and
    "ffi.f32.<name>"), `operands` as inputs arg0, arg1, ... and `results`
    as outputs ret0, ret1, ..., both (value, dtype) pairs in the call's
    order. The CPU's call must take the same operands and give the first of
    the results: a CUDA handler may give more (its scratch)."""
    target, cpu_operands, cpu_results, attrs = xla_custom_call(fn, *args)

    def shapes(values):
        return [(t, tuple(np.shape(v))) for v, t in values]

    if (
        cpu_operands != shapes(operands)
        or cpu_results != shapes(results)[: len(cpu_results)]
    ):
        raise ValueError(
            f"{name}: {target} takes {cpu_operands} and gives {cpu_results}, "
            f"not {shapes(operands)} and {shapes(results)}"
        )
    ffi_attrs = {}
    for key, value in attrs.items():
        if isinstance(value, list):
            ffi_attrs[f"ffi.i64s.{key}"] = len(value)
            ffi_attrs.update({f"ffi.i64s.{key}.{i}": v for i, v in enumerate(value)})
        else:
            ffi_attrs[f"ffi.f32.{key}"] = value
    inputs = {f"arg{i}": to_file(v, t) for i, (v, t) in enumerate(operands)}
    outputs = {f"ret{i}": to_file(v, t) for i, (v, t) in enumerate(results)}
    # The tolerance is the results', not the scratch's (a copy, say).
    cpu_outputs = {f"ret{i}": outputs[f"ret{i}"] for i in range(len(cpu_results))}
    attrs = dict(ffi_attrs, **tolerance(kind, dtype, cpu_outputs))
    return case_file.Case(name, "xla:" + target, attrs, inputs, outputs)


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
