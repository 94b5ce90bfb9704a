"""Registry entry of ZeroOut."""

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.registry import values
from tensorflow_customops.python.registry.entry import Case, Entry
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    MEGA,
    huge_empty,
    traced_shapes,
)


def _property_case(dtype):
    # parallelFor over elements, 3 cycles each.
    cast = values.cast_to(dtype)
    return Case(
        f"zero_out_{dtype.name}",
        lambda seed: [values.rounded_normal(values.rng(seed), (1024, 1031), dtype)],
        lambda x: tfco.zero_out(cast(x), keep=300_000),
        (0,),
    )


def _large_shapes(test):
    spec = tf.TensorSpec([BIG, MEGA, None], tf.float32)
    test.assertEqual(traced_shapes(tfco.zero_out, spec), [[BIG, MEGA, None]])
    test.assertEqual(tfco.zero_out(huge_empty(), keep=HUGE).shape, [0, HUGE, HUGE])


def _gradient_cases():
    return [
        Case(
            f"keep{keep}",
            lambda seed: [values.normal(seed + 2, 6)],
            lambda x, k=keep: tfco.zero_out(x, keep=k),
            (0,),
        )
        for keep in (1, 3, 10)
    ]


# Takes any shape: the fuzzer's generic inputs suit it.
ENTRIES = [
    Entry(
        "CustomOps>ZeroOut",
        large_shapes=_large_shapes,
        property_cases=lambda: [
            _property_case(tf.float32),
            _property_case(tf.float16),
        ],
        gradient_cases=_gradient_cases,
    ),
]
