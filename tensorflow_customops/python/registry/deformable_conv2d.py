"""Registry entry of DeformableConv2d."""

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
    # parallelFor over 10^6 elements, 2 cycles each: split over 4 threads.
    cast = values.cast_to(dtype)
    return Case(
        f"deformable_conv2d_{dtype.name}",
        lambda seed: [values.rounded_normal(values.rng(seed), (1024, 1031), dtype)],
        lambda x: tfco.deformable_conv2d(cast(x), alpha=0.75),
        (0,),
    )


def _large_shapes(test):
    spec = tf.TensorSpec([BIG, MEGA, None], tf.float32)
    test.assertEqual(traced_shapes(tfco.deformable_conv2d, spec), [[BIG, MEGA, None]])
    test.assertEqual(
        tfco.deformable_conv2d(huge_empty(), alpha=2.0).shape, [0, HUGE, HUGE]
    )


def _gradient_cases():
    return [
        Case(
            f"alpha{alpha}",
            lambda seed: [values.normal(seed + 1, 2, 3)],
            lambda x, a=alpha: tfco.deformable_conv2d(x, alpha=a),
            (0,),
        )
        for alpha in (1.0, -1.5)
    ]


# Takes any shape: the fuzzer's generic inputs suit it.
ENTRIES = [
    Entry(
        "CustomOps>DeformableConv2d",
        large_shapes=_large_shapes,
        property_cases=lambda: [
            _property_case(tf.float32),
            _property_case(tf.bfloat16),
        ],
        gradient_cases=_gradient_cases,
    ),
]
