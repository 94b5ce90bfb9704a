"""Registry entries of ClipByGlobalNorm and ClipByGlobalNormGrad."""

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st
from tensorflow.core.framework import attr_value_pb2

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import arrays, values
from tensorflow_customops.python.registry.entry import Case, Entry, Override
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    MEGA,
    huge_empty,
    traced_shapes,
)

_ops = load_library.load_op_library()

# Parallel over chunks of 2^14 elements of the tensors taken as one sequence;
# 20 tensors of up to 60000 elements give about 40 chunks.
_SIZES = [int(s) for s in values.rng(3).integers(1, 60_000, size=20)]


def _inputs(seed, dtype):
    rng = values.rng(seed)
    tensors = [values.rounded_normal(rng, (size,), dtype) for size in _SIZES]
    return tensors + [np.array(20.0, tensors[0].dtype)]


def _property_case(dtype):
    cast = values.cast_to(dtype)

    def forward(*args):
        clipped, norm = tfco.clip_by_global_norm(
            [cast(t) for t in args[:-1]], cast(args[-1])
        )
        return clipped + [norm]

    return Case(
        f"clip_by_global_norm_{dtype.name}",
        lambda seed: _inputs(seed, dtype),
        forward,
        tuple(range(len(_SIZES) + 1)),
    )


def _grad_property_case(dtype):
    count = len(_SIZES)
    cast = values.cast_to(dtype)

    def make(seed):
        rng = values.rng(seed)
        dclipped = [values.rounded_normal(rng, (size,), dtype) for size in _SIZES]
        return _inputs(seed, dtype) + dclipped + [dclipped[0][:1].reshape(())]

    def forward(*args):
        args = [cast(x) for x in args]
        dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
            t=args[:count],
            clip_norm=args[count],
            dclipped=args[count + 1 : 2 * count + 1],
            dglobal_norm=args[-1],
        )
        return list(dt) + [dclip_norm]

    return Case(f"clip_by_global_norm_grad_{dtype.name}", make, forward)


def _large_shapes(test):
    def clip(huge, small):
        clipped, norm = tfco.clip_by_global_norm([huge, small], 1.0)
        return clipped + [norm]

    specs = [
        tf.TensorSpec([BIG, MEGA, None], tf.float32),
        tf.TensorSpec([None], tf.float32),
    ]
    test.assertEqual(traced_shapes(clip, *specs), [[BIG, MEGA, None], [None], []])
    huge, norm = clip(huge_empty(), tf.constant([3.0, 4.0]))[::2]
    test.assertEqual(huge.shape, [0, HUGE, HUGE])
    test.assertEqual(norm.numpy(), 5.0)


def _grad_large_shapes(test):
    def grad(t, dclipped):
        dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
            t=[t], clip_norm=1.0, dclipped=[dclipped], dglobal_norm=1.0
        )
        return list(dt) + [dclip_norm]

    specs = [
        tf.TensorSpec([BIG, None, 2**10], tf.float32),
        tf.TensorSpec([None, 2**10, 2**10], tf.float32),
    ]
    test.assertEqual(traced_shapes(grad, *specs), [[BIG, 2**10, 2**10], []])
    # t and dclipped are each valid; the shape they must share is not.
    with test.assertRaisesRegex(
        ValueError,
        r"dt \[1099511627776,1099511627776\]: its number of elements overflows "
        r"int64",
    ):
        traced_shapes(
            grad,
            tf.TensorSpec([BIG, None], tf.float32),
            tf.TensorSpec([None, BIG], tf.float32),
        )
    dt, dclip_norm = grad(huge_empty(), huge_empty())
    test.assertEqual(dt.shape, [0, HUGE, HUGE])
    test.assertEqual(dclip_norm.numpy(), 0.0)


def _flat_clip(clipped, global_norm):
    return [*clipped, global_norm]


def _gradient_cases():
    return [
        Case(
            f"n{n}_clip{clip}",
            lambda seed, n=n, clip=clip: (
                [values.normal(seed + 5 + i, 3, 2) for i in range(n)] + [np.array(clip)]
            ),
            lambda *xs: _flat_clip(*tfco.clip_by_global_norm(list(xs[:-1]), xs[-1])),
            None,
        )
        for n in (1, 3)
        for clip in (0.5, 100.0)
    ]


@st.composite
def _tensor_list(draw, rng, dtype, count):
    shapes = [
        tuple(draw(st.lists(st.integers(0, 4), max_size=3))) for _ in range(count)
    ]
    return [arrays.make_array(rng, dtype, s, -100, 100) for s in shapes]


def _clip_norm(rng, dtype):
    return arrays.make_array(rng, dtype, (), 0, 10)


@st.composite
def _fuzz_hint(draw, op_def, attrs, rng):
    dtype = arrays.float_type(attrs)
    count = arrays.small_dim(attrs.get("N"), 1)
    return {
        "t": draw(_tensor_list(rng, dtype, count)),
        "clip_norm": _clip_norm(rng, dtype),
    }, ()


@st.composite
def _grad_fuzz_hint(draw, op_def, attrs, rng):
    dtype = arrays.float_type(attrs)
    t = draw(_tensor_list(rng, dtype, arrays.small_dim(attrs.get("N"), 1)))
    return {
        "t": t,
        "clip_norm": _clip_norm(rng, dtype),
        "dclipped": [arrays.make_array(rng, dtype, x.shape) for x in t],
        "dglobal_norm": arrays.make_array(rng, dtype, ()),
    }, ()


_N2 = {"N": attr_value_pb2.AttrValue(i=2)}

ENTRIES = [
    Entry(
        "CustomOps>ClipByGlobalNorm",
        large_shapes=_large_shapes,
        property_cases=lambda: (
            [_property_case(tf.float32)]
            + [_property_case(d) for d in values.FLOAT_DTYPES if d != tf.float32]
        ),
        gradient_cases=_gradient_cases,
        fuzz_hint=_fuzz_hint,
        xla_tolerance={
            "float64": (1e-14, 1e-16, "the sums in double add in another order"),
        },
        golden=Override(
            inputs=values.shaped_small_values((2, 3), (3,), ()),
            attrs=_N2,
            output_grads=values.shaped_small_values((2, 3), (3,), ()),
        ),
    ),
    Entry(
        "CustomOps>ClipByGlobalNormGrad",
        large_shapes=_grad_large_shapes,
        property_cases=lambda: [
            _grad_property_case(tf.float32),
            _grad_property_case(tf.float16),
        ],
        fuzz_hint=_grad_fuzz_hint,
        xla_shape_errors=lambda: [
            (
                Case(
                    "dclipped_shape",
                    lambda seed: [np.zeros([2, 3]), np.zeros([3, 2])],
                    lambda t, dt: _ops.custom_ops_clip_by_global_norm_grad(
                        [t], 1.0, [dt], 0.0
                    ),
                ),
                r"ClipByGlobalNormGrad: dclipped\[0\] has shape \[3,2\]",
            )
        ],
        golden=Override(
            inputs=values.shaped_small_values((2, 3), (3,), (), (2, 3), (3,), ()),
            attrs=_N2,
        ),
    ),
]
