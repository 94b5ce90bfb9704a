"""Fuzz cases for the library's ops, generated from their OpDefs.

Every op is fuzzed from its OpDef alone: attrs from their types, allowed
values, defaults and minimums, inputs from their dtypes and counts. A small
table of hints (the fuzz_hint of the ops' registry entries) adds inputs of the
right structure for ops whose valid inputs random shapes would rarely hit
(boxes, matching gradients), so that the kernels' success paths run too; an
op without a hint is still fuzzed generically. Mutations then make cases
invalid: wrong ranks, mismatched, empty and huge dimensions, non-finite,
negative and out-of-range values, disallowed dtypes, wrong list lengths.

A case is plain data (numpy arrays, Python scalars, DataType enum values), so
it can be pickled to a worker process and saved for replay.
"""

import dataclasses
import math

import hypothesis
import numpy as np
from hypothesis import strategies as st
from tensorflow.core.framework import types_pb2

from tensorflow_customops.python.registry.arrays import (
    dtype_enum_of,
    is_float,
    make_array,
)

# Offered when a case feeds a dtype the op does not allow.
_OTHER_DTYPES = [
    types_pb2.DT_INT32,
    types_pb2.DT_INT64,
    types_pb2.DT_UINT8,
    types_pb2.DT_BOOL,
    types_pb2.DT_COMPLEX64,
    types_pb2.DT_STRING,
    types_pb2.DT_HALF,
    types_pb2.DT_DOUBLE,
]
_INT_EXTREMES = [-(2**63), -(2**31), -1, 0, 2**31 - 1, 2**31, 2**63 - 1, 1 << 20]
# A list length attr (N in `N * T`) set to a huge value that contradicts the
# inputs makes TensorFlow's eager runtime itself build a signature of N dtypes
# before validating anything (gigabytes for 2**31 - 1; AddN too), so the
# extremes stop where TensorFlow still answers with an error.
_LENGTH_EXTREMES = [-(2**63), -1, 0, 1000]
_FLOAT_EXTREMES = [math.nan, math.inf, -math.inf, 0.0, -1.0, 1e-45, 1e38, 1e39]
# Input values that break arithmetic: non-finite, negative, denormal, huge.
_FLOAT_SPECIALS = [math.nan, math.inf, -math.inf, -1.0, -1e30, 1e30, 1e-40, 3e38]
_INT_SPECIALS = [-1, -(2**31), 2**31 - 1, 2**30, 1 << 20, 7]
# Dimensions that are zero-sized but huge: no memory, overflowing products.
HUGE_DIMS = [2**31 - 1, 2**31, 2**40, 2**62]
_SMALL_DIMS = [0, 1, 1, 2, 2, 3, 4, 5, 7]
_MAX_ELEMENTS = 1 << 16

MUTATIONS = (
    "wrong_rank",
    "mismatched_shape",
    "zero_sized",
    "huge_zero_sized",
    "special_values",
    "wrong_dtype",
    "input_count",
)


@dataclasses.dataclass
class Case:
    """One call of one op: its attrs and its inputs (an array, or a list of
    arrays, per input argument), with tags saying what was varied."""

    op: str
    index: int
    attrs: dict
    inputs: dict
    tags: tuple = ()

    def describe(self):
        lines = [f"{self.op} case {self.index} ({', '.join(self.tags) or 'plain'})"]
        lines += [f"  attr {k} = {v!r}" for k, v in self.attrs.items()]
        for name, value in self.inputs.items():
            arrays = value if isinstance(value, list) else [value]
            for i, array in enumerate(arrays):
                label = f"{name}[{i}]" if isinstance(value, list) else name
                text = "" if array.size == 0 else np.array2string(array, threshold=12)
                lines.append(f"  input {label}: {array.dtype} {array.shape} {text}")
        return "\n".join(lines)


# --- attrs -----------------------------------------------------------------


def _sane_int(attr):
    low = attr.minimum if attr.has_minimum else -1
    options = [low, low + 1, low + 2, low + 3]
    if attr.default_value.HasField("i"):
        options.append(attr.default_value.i)
    return st.sampled_from(options)


@st.composite
def _dtype(draw, attr, extreme):
    allowed = list(attr.allowed_values.list.type)
    if extreme or not allowed:
        return draw(st.sampled_from([t for t in _OTHER_DTYPES if t not in allowed]))
    return draw(st.sampled_from(allowed))


@st.composite
def _attr_value(draw, attr, extreme):
    """A value for `attr` (an OpDef.AttrDef): usually an ordinary one, or with
    `extreme` one outside or at the edge of what the OpDef allows."""
    kind = attr.type
    if kind == "type":
        return draw(_dtype(attr, extreme))
    if kind == "list(type)":
        low = attr.minimum if attr.has_minimum else 0
        length = draw(st.integers(max(low - int(extreme), 0), low + 3))
        bad = [draw(st.booleans()) and extreme for _ in range(length)]
        return [draw(_dtype(attr, b)) for b in bad]
    if kind == "int":
        if extreme:
            return draw(st.sampled_from(_INT_EXTREMES))
        return draw(_sane_int(attr))
    if kind == "float":
        if extreme:
            return draw(st.sampled_from(_FLOAT_EXTREMES))
        default = attr.default_value.f if attr.default_value.HasField("f") else 1.0
        return draw(st.sampled_from([default, 0.5, 0.25, 1.0, 2.0]))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "string":
        allowed = [s.decode() for s in attr.allowed_values.list.s]
        if allowed and not extreme:
            return draw(st.sampled_from(allowed))
        return draw(
            st.sampled_from(["", "fuzz", "NCDHW", "\x00", "%s%n" * 4, "é" * 300])
        )
    if kind == "list(int)":
        if (
            not extreme
            and attr.HasField("default_value")
            and draw(st.integers(0, 3)) > 0
        ):
            # Mostly the default, so that ops whose lists have a structure
            # (Conv2D-style strides) get calls that run.
            return None
        return draw(
            st.lists(
                st.sampled_from(_INT_EXTREMES if extreme else [0, 1, 2]), max_size=4
            )
        )
    if kind == "list(float)":
        values = _FLOAT_EXTREMES if extreme else [0.5, 1.0]
        return draw(st.lists(st.sampled_from(values), max_size=4))
    if attr.HasField("default_value"):
        return None  # Left to its default.
    raise NotImplementedError(
        f"fuzzing has no generator for attr {attr.name} of type {kind}: add one to "
        "op_cases._attr_value"
    )


def _number_attrs(op_def):
    return {arg.number_attr for arg in op_def.input_arg if arg.number_attr}


@st.composite
def attrs_for(draw, op_def):
    """Attr values for `op_def`; at most a couple of them extreme."""
    extreme = set()
    if draw(st.integers(0, 4)) == 0:
        names = [a.name for a in op_def.attr]
        extreme = set(draw(st.lists(st.sampled_from(names), min_size=1, max_size=2)))
    attrs = {}
    for attr in op_def.attr:
        if attr.name in _number_attrs(op_def):
            if attr.name in extreme:
                attrs[attr.name] = draw(st.sampled_from(_LENGTH_EXTREMES))
            else:
                attrs[attr.name] = draw(st.integers(max(attr.minimum, 1), 4))
            continue
        value = draw(_attr_value(attr, attr.name in extreme))
        if value is not None:
            attrs[attr.name] = value
    return attrs, tuple(f"extreme_{name}" for name in sorted(extreme))


# --- inputs ----------------------------------------------------------------


def input_dtypes(op_def, arg, attrs):
    """The dtypes the OpDef gives `arg` under `attrs`: one per tensor."""
    if arg.type_list_attr:
        return list(attrs.get(arg.type_list_attr, []))
    dtype = attrs.get(arg.type_attr, types_pb2.DT_FLOAT) if arg.type_attr else arg.type
    if arg.number_attr:
        # An extreme N can be huge or negative: feed a few tensors regardless.
        return [dtype] * min(max(attrs.get(arg.number_attr, 1), 0), 5)
    return [dtype]


@st.composite
def _shape(draw, max_rank=4):
    return tuple(draw(st.lists(st.sampled_from(_SMALL_DIMS), max_size=max_rank)))


@st.composite
def generic_inputs(draw, op_def, attrs, rng):
    """Inputs from the OpDef alone: tensors share one shape, or are scalars,
    or have shapes of their own."""
    base = draw(_shape())
    inputs = {}
    for arg in op_def.input_arg:
        arrays = []
        for dtype in input_dtypes(op_def, arg, attrs):
            shape = draw(st.sampled_from([base, base, (), None]))
            if shape is None:
                shape = draw(_shape())
            arrays.append(make_array(rng, dtype, shape))
        is_list = bool(arg.number_attr or arg.type_list_attr)
        inputs[arg.name] = arrays if is_list else arrays[0]
    return inputs


# --- mutations -------------------------------------------------------------


def _tensors(inputs):
    """(name, position or None) of every tensor in `inputs`."""
    for name, value in inputs.items():
        if isinstance(value, list):
            for i in range(len(value)):
                yield name, i
        else:
            yield name, None


def _get(inputs, where):
    name, i = where
    return inputs[name] if i is None else inputs[name][i]


def _set(inputs, where, array):
    name, i = where
    if i is None:
        inputs[name] = array
    else:
        inputs[name][i] = array


@st.composite
def _mutate(draw, inputs, mutation, rng):
    """Applies `mutation` (one of MUTATIONS) to one tensor of `inputs`."""
    tensors = list(_tensors(inputs))
    if mutation == "input_count":
        lists = [name for name, value in inputs.items() if isinstance(value, list)]
        if not lists:
            return False
        name = draw(st.sampled_from(lists))
        if inputs[name] and draw(st.booleans()):
            inputs[name].pop()
        else:
            inputs[name].append(inputs[name][-1] if inputs[name] else np.zeros(2))
        return True
    if not tensors:
        return False
    where = draw(st.sampled_from(tensors))
    array = _get(inputs, where)
    dtype = dtype_enum_of(array)
    if mutation == "special_values":
        if array.size == 0 or dtype in (types_pb2.DT_STRING, types_pb2.DT_BOOL):
            return False
        _set(inputs, where, _with_specials(draw, array, dtype))
        return True
    shape = list(array.shape)
    if mutation == "wrong_rank":
        if shape and draw(st.booleans()):
            shape.pop(draw(st.integers(0, len(shape) - 1)))
        else:
            shape.insert(
                draw(st.integers(0, len(shape))), draw(st.sampled_from([1, 2]))
            )
    elif mutation == "wrong_dtype":
        dtype = draw(st.sampled_from([t for t in _OTHER_DTYPES if t != dtype]))
    else:  # A dimension changed: mismatched, zero, or huge in an empty tensor.
        if not shape:
            shape = [1]
        axis = draw(st.integers(0, len(shape) - 1))
        if mutation == "mismatched_shape":
            shape[axis] = draw(
                st.sampled_from([d for d in (1, 2, 3, 6) if d != shape[axis]])
            )
        elif mutation == "zero_sized":
            shape[axis] = 0
        else:
            if len(shape) < 2:
                shape.insert(0, 0)
                axis += 1
            else:
                shape[
                    draw(st.sampled_from([a for a in range(len(shape)) if a != axis]))
                ] = 0
            shape[axis] = draw(st.sampled_from(HUGE_DIMS))
    if math.prod(shape) > _MAX_ELEMENTS:
        return False  # A non-empty tensor with a huge dimension: no memory for it.
    _set(inputs, where, make_array(rng, dtype, shape))
    return True


def _with_specials(draw, array, dtype):
    """A copy of `array` with a few values replaced by non-finite, negative,
    denormal or huge ones (for integers: extremes of their range)."""
    array = array.copy()
    flat = array.reshape(-1)
    specials = _FLOAT_SPECIALS if is_float(dtype) else _INT_SPECIALS
    for _ in range(draw(st.integers(1, 3))):
        value = draw(st.sampled_from(specials))
        if np.issubdtype(array.dtype, np.integer):
            info = np.iinfo(array.dtype)
            value = min(max(value, info.min), info.max)
        with np.errstate(over="ignore", invalid="ignore"):
            flat[draw(st.integers(0, flat.size - 1))] = value
    return array


# --- cases -----------------------------------------------------------------


@st.composite
def case_for(draw, op_def, hints):
    """One Case for `op_def`. `hints` maps op names to hint strategies
    (registry.fuzz_hints()); the op's hint, if any, supplies well-structured
    inputs for most cases."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    attrs, tags = draw(attrs_for(op_def))
    hint = hints.get(op_def.name)
    if hint is not None and draw(st.integers(0, 4)) > 0:
        inputs, hint_tags = draw(hint(op_def, attrs, rng))
        tags += ("hinted",) + hint_tags
    else:
        inputs = draw(generic_inputs(op_def, attrs, rng))
        tags += ("generic",)
    if draw(st.booleans()):
        for mutation in draw(
            st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=2)
        ):
            if draw(_mutate(inputs, mutation, rng)):
                tags += (mutation,)
    return Case(op=op_def.name, index=-1, attrs=attrs, inputs=inputs, tags=tags)


def generate(op_def, count, seed, hints):
    """`count` (at most) cases for `op_def`, the same ones for the same seed.

    Hypothesis only generates here (no shrinking, no example database): each
    case then runs in a worker process, where a crash can be caught.
    """
    cases = []

    @hypothesis.seed(seed)
    @hypothesis.settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(case_for(op_def, hints))
    def collect(case):
        case.index = len(cases)
        cases.append(case)

    collect()
    return cases
