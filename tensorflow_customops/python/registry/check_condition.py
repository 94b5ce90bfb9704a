"""Registry entry of CheckCondition, the run-time check that XLA keeps."""

import numpy as np
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


def _finite(*xs):
    """A condition that depends on the values, so that XLA cannot fold it."""
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(x)) for x in xs])


def _property_cases():
    # Mixed dtypes passed through, the gradient too.
    dtypes = values.FLOAT_DTYPES

    def make(seed):
        rng = values.rng(seed)
        return [values.rounded_normal(rng, (600, 1000), dtype) for dtype in dtypes]

    def forward(*xs):
        cast = [tf.cast(x, d) for x, d in zip(xs, dtypes)]
        return tfco.check_condition(_finite(*cast), cast, "property case")

    return [Case("check_condition_mixed", make, forward, tuple(range(len(dtypes))))]


def _large_shapes(test):
    def check(x, y):
        return tfco.check_condition(tf.size(x) >= 0, [x, y], "large")

    specs = [
        tf.TensorSpec([BIG, MEGA], tf.float16),
        tf.TensorSpec([None, BIG], tf.int64),
    ]
    test.assertEqual(traced_shapes(check, *specs), [[BIG, MEGA], [None, BIG]])
    x, _ = check(huge_empty(tf.float16), tf.constant([1], tf.int64))
    test.assertEqual(x.shape, [0, HUGE, HUGE])
    # A condition of shape [0, 2^62, 2^62] holds: it has no element.
    (y,) = tfco.check_condition(tf.zeros([0, HUGE, HUGE], tf.bool), [x], "empty")
    test.assertEqual(y.shape, [0, HUGE, HUGE])


def _gradient_cases():
    def make(seed):
        return [values.normal(seed + 8, 3), values.normal(seed + 9, 2, 2)]

    return [
        Case(
            "one_dtype",
            make,
            lambda a, b: tfco.check_condition(_finite(a, b), [a, b], "message"),
            None,
        ),
        Case(
            "mixed_dtypes",
            make,
            lambda a, b: tfco.check_condition(
                _finite(a), [a, tf.cast(b, tf.float64)], "m"
            ),
            None,
        ),
    ]


def _golden_inputs(dtypes, rng):
    return [np.array(True)] + [
        (rng.standard_normal((2, 3)) * 4).astype(d.as_numpy_dtype) for d in dtypes[1:]
    ]


# Takes any shapes, and a random bool condition both holds and fails: the
# fuzzer's generic inputs suit it.
ENTRIES = [
    Entry(
        "CustomOps>CheckCondition",
        large_shapes=_large_shapes,
        property_cases=_property_cases,
        gradient_cases=_gradient_cases,
        # A condition known only at run time is checked by a custom call on
        # the CPU; the HLO lowering passes the values through.
        xla_custom_call=True,
        stateful="a check, like Assert",
        golden=Override(
            inputs=_golden_inputs,
            attrs={
                "T": attr_value_pb2.AttrValue(
                    list=attr_value_pb2.AttrValue.ListValue(
                        type=[tf.float32.as_datatype_enum, tf.float64.as_datatype_enum]
                    )
                ),
                "message": attr_value_pb2.AttrValue(s=b"golden"),
            },
        ),
    ),
]
