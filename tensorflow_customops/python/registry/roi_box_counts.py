"""Registry entry of RoiBoxCounts, the check of per-image box counts that the
RoI functions run for `[N, K, 4]` boxes: its cases go through them."""

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st
from tensorflow.core.framework import types_pb2

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import arrays, boxes, values
from tensorflow_customops.python.registry.entry import Case, Entry, Override
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    MEGA,
    traced_shapes,
)

_ops = load_library.load_op_library()

# Two images of 40 x 40, 300 boxes each, 210 and 300 of them real: RoIAlign
# splits the real boxes' bins over 4 threads.
_COUNTS = np.array([210, 300], np.int64)


def _property_inputs(seed):
    rng = values.rng(seed)
    features = values.rounded_normal(rng, (2, 40, 40, 16), tf.float32)
    rows = boxes.uniform(rng, 600, 1, 40, 40)
    return [features, rows[:, 1:].reshape(2, 300, 4)]


def _property_case():
    return Case(
        "roi_align_box_counts",
        _property_inputs,
        lambda features, rois: tfco.roi_align(
            features, rois, 4, sampling_ratio=2, box_counts=_COUNTS
        ),
        (0,),
    )


def _large_shapes(test):
    def checked(features, rois, counts):
        return _ops.custom_ops_roi_box_counts(features, rois, counts)

    specs = [
        tf.TensorSpec([BIG, None, None, None], tf.float32),
        tf.TensorSpec([BIG, MEGA, 4], tf.float32),
        tf.TensorSpec([BIG], tf.int64),
    ]
    test.assertEqual(traced_shapes(checked, *specs), [[BIG]])
    # K beyond int32 (boxes with no coordinates allocate nothing) and counts
    # up to it, compared in int64.
    features, rois = tf.zeros([2, 0, 0, HUGE]), tf.zeros([2, BIG, 0])
    counts = tf.constant([BIG, 0], tf.int64)
    test.assertAllEqual(checked(features, rois, counts), counts)
    with test.assertRaisesRegex(
        tf.errors.InvalidArgumentError,
        rf"box_counts must be at most rois.shape\[1\] \({BIG}\), got \[{BIG + 1}, 0\]",
    ):
        checked(features, rois, counts + [1, 0])


def _golden_inputs(dtypes, rng):
    del rng
    return [
        np.ones([2, 3, 3, 1], dtypes[0].as_numpy_dtype),
        np.ones([2, 3, 4], dtypes[1].as_numpy_dtype),
        np.array([1, 3], dtypes[2].as_numpy_dtype),
    ]


@st.composite
def _fuzz_hint(draw, op_def, attrs, rng):
    """Images and boxes of matching counts, and counts in [0, K] or, tagged,
    one beyond either end."""
    n, k = draw(st.sampled_from([0, 1, 2, 3])), draw(st.sampled_from([0, 1, 3]))
    features = arrays.make_array(rng, arrays.float_type(attrs), (n, 2, 2, 1))
    rois = arrays.make_array(rng, attrs.get("Trois", types_pb2.DT_FLOAT), (n, k, 4))
    counts = rng.integers(0, k + 1, size=n)
    tags = ()
    if n and draw(st.booleans()):
        counts[draw(st.integers(0, n - 1))] = draw(st.sampled_from([-1, k + 1]))
        tags = ("invalid_count",)
    count_type = attrs.get("Tcounts", types_pb2.DT_INT32)
    if count_type in (types_pb2.DT_INT32, types_pb2.DT_INT64):
        counts = counts.astype(arrays.numpy_type(count_type))
    return {"features": features, "rois": rois, "box_counts": counts}, tags


ENTRIES = [
    Entry(
        "CustomOps>RoiBoxCounts",
        large_shapes=_large_shapes,
        property_cases=lambda: [_property_case()],
        fuzz_hint=_fuzz_hint,
        stateful="a check of box_counts, like Assert",
        golden=Override(inputs=_golden_inputs),
    ),
]
