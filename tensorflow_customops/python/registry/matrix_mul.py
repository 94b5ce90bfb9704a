"""Registry entry of MatrixMul."""

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import arrays, values
from tensorflow_customops.python.registry.entry import Case, Entry, Override
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    traced_shapes,
)


def _property_case(transpose_a, transpose_b, dtype=tf.float32, m=128, k=4096, n=96):
    """Eigen's thread-pool contraction. Its blocking splits the inner
    dimension only when it is long, and shards over it when m and n are
    small: both change the order of the sums, so k is long here."""
    cast = values.cast_to(dtype)

    def make(seed):
        rng = values.rng(seed)
        a = values.rounded_normal(rng, (k, m) if transpose_a else (m, k), dtype)
        b = values.rounded_normal(rng, (n, k) if transpose_b else (k, n), dtype)
        return [a, b]

    suffix = ("t" if transpose_a else "n") + ("t" if transpose_b else "n")
    return Case(
        f"matrix_mul_{suffix}_{m}x{k}x{n}_{dtype.name}",
        make,
        lambda a, b: tfco.matrix_mul(
            cast(a), cast(b), transpose_a=transpose_a, transpose_b=transpose_b
        ),
        (0, 1),
    )


def _property_cases():
    transposes = ((False, True), (True, False), (True, True))
    return (
        [_property_case(False, False)]
        + [_property_case(ta, tb) for ta, tb in transposes]
        + [
            _property_case(False, False, m=16, k=131072, n=16),
            _property_case(False, False, tf.bfloat16, k=1024),
        ]
    )


def _large_shapes(test):
    def specs(m, n, ta, tb):
        return (
            tf.TensorSpec([None, m] if ta else [m, None], tf.float32),
            tf.TensorSpec([n, None] if tb else [None, n], tf.float32),
        )

    for ta in (False, True):
        for tb in (False, True):

            def product(a, b, ta=ta, tb=tb):
                return tfco.matrix_mul(a, b, transpose_a=ta, transpose_b=tb)

            side = 2**31 + 1  # m * n = 2^62 + 2^32 + 1 fits int64
            test.assertEqual(
                traced_shapes(product, *specs(side, side, ta, tb)),
                [[side, side]],
            )
            with test.assertRaisesRegex(
                ValueError,
                r"MatrixMul: the product \[1099511627776,1099511627776\]: its "
                r"number of elements overflows int64",
            ):
                traced_shapes(product, *specs(BIG, BIG, ta, tb))
            # An empty inner dimension makes both inputs free; the
            # [2^62, 2^62] product of zeros overflows int64.
            a = tf.zeros([0, HUGE] if ta else [HUGE, 0])
            b = tf.zeros([HUGE, 0] if tb else [0, HUGE])
            with test.assertRaisesRegex(
                tf.errors.InvalidArgumentError,
                r"MatrixMul: the product \[4611686018427387904, "
                r"4611686018427387904\]: its number of elements overflows int64",
            ):
                product(a, b)
    # A product whose size fits int64 but not memory fails cleanly.
    side = 2**31 + 1
    with test.assertRaises(tf.errors.ResourceExhaustedError):
        tfco.matrix_mul(tf.zeros([side, 0]), tf.zeros([0, side]))


def _gradient_cases():
    return [
        Case(
            f"ta{ta}_tb{tb}",
            lambda seed, ta=ta, tb=tb: [
                values.normal(seed + 3, *((4, 3) if ta else (3, 4))),
                values.normal(seed + 4, *((2, 4) if tb else (4, 2))),
            ],
            lambda a, b, ta=ta, tb=tb: tfco.matrix_mul(
                a, b, transpose_a=ta, transpose_b=tb
            ),
            (0, 1),
        )
        for ta in (False, True)
        for tb in (False, True)
    ]


@st.composite
def _fuzz_hint(draw, op_def, attrs, rng):
    m, k, n = (draw(st.sampled_from([0, 1, 2, 3, 5])) for _ in range(3))
    a = [k, m] if attrs.get("transpose_a") else [m, k]
    b = [n, k] if attrs.get("transpose_b") else [k, n]
    dtype = arrays.float_type(attrs)
    return {
        "a": arrays.make_array(rng, dtype, a),
        "b": arrays.make_array(rng, dtype, b),
    }, ()


ENTRIES = [
    Entry(
        "CustomOps>MatrixMul",
        large_shapes=_large_shapes,
        property_cases=_property_cases,
        gradient_cases=_gradient_cases,
        fuzz_hint=_fuzz_hint,
        xla_tolerance={
            "float32": (1e-6, 1e-6, "XLA's dot sums the products in another order"),
            "float64": (1e-14, 1e-15, "XLA's dot sums the products in another order"),
        },
        xla_shape_errors=lambda: [
            (
                Case(
                    "inner_mismatch",
                    lambda seed: [np.zeros([2, 3]), np.zeros([4, 2])],
                    load_library.load_op_library().custom_ops_matrix_mul,
                ),
                "MatrixMul: inner dimensions differ",
            )
        ],
        golden=Override(
            inputs=values.shaped_small_values((2, 3), (3, 2)),
            output_grads=values.shaped_small_values((2, 2)),
        ),
    ),
]
