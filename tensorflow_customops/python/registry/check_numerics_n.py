"""Registry entry of CheckNumericsN."""

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

import tensorflow_customops as tfco
from tensorflow_customops.python.registry import values
from tensorflow_customops.python.registry.entry import Case, Entry, Override
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    MEGA,
    huge_empty,
    traced_shapes,
)


def _property_cases():
    # parallelFor over the elements of each tensor, mixed dtypes; the gradient
    # passes through.
    dtypes = values.FLOAT_DTYPES

    def make(seed):
        rng = values.rng(seed)
        return [values.rounded_normal(rng, (600, 1000), dtype) for dtype in dtypes]

    return [
        Case(
            "check_numerics_n_mixed",
            make,
            lambda *xs: tfco.check_numerics_n(
                [tf.cast(x, d) for x, d in zip(xs, dtypes)], "op_cases"
            ),
            tuple(range(len(dtypes))),
        )
    ]


def _large_shapes(test):
    def check(x, y):
        return tfco.check_numerics_n([x, y], "large")

    specs = [
        tf.TensorSpec([BIG, MEGA], tf.float16),
        tf.TensorSpec([None, BIG], tf.float64),
    ]
    test.assertEqual(traced_shapes(check, *specs), [[BIG, MEGA], [None, BIG]])
    x, _ = check(huge_empty(tf.float16), tf.constant([1.0], tf.float64))
    test.assertEqual(x.shape, [0, HUGE, HUGE])


def _gradient_cases():
    def make(seed):
        return [values.normal(seed + 6, 3), values.normal(seed + 7, 2, 2)]

    return [
        Case(
            "one_dtype",
            make,
            lambda a, b: tfco.check_numerics_n([a, b], "message"),
            None,
        ),
        Case(
            "mixed_dtypes",
            make,
            lambda a, b: tfco.check_numerics_n([a, tf.cast(b, tf.float64)], "m"),
            None,
        ),
    ]


# Takes any shapes: the fuzzer's generic inputs suit it.
ENTRIES = [
    Entry(
        "CustomOps>CheckNumericsN",
        large_shapes=_large_shapes,
        property_cases=_property_cases,
        gradient_cases=_gradient_cases,
        # A program of HLO cannot raise on the values it computes; the custom
        # call runs the kernel's check.
        xla_unsupported="CheckNumericsN cannot be compiled with XLA here",
        xla_custom_call=True,
        golden=Override(
            attrs={
                "T": attr_value_pb2.AttrValue(
                    list=attr_value_pb2.AttrValue.ListValue(
                        type=[tf.float32.as_datatype_enum, tf.float64.as_datatype_enum]
                    )
                ),
                "message": attr_value_pb2.AttrValue(s=b"golden"),
            }
        ),
    ),
]
