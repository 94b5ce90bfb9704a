"""CustomOps>RoiBoxCounts: the check of per-image box counts that the RoI
functions run for `[N, K, 4]` boxes (`roi_boxes.py`), as an op so that it
raises under XLA too, where Python `Assert`s are dropped."""

import tensorflow as tf

from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()


def checked_box_counts(features, rois, box_counts):
    """`box_counts` (int32 or int64 `[N]`), after the op has checked that
    `features` (`[N, ...]`, rank 4) and `rois` (`[N, K, 4]`) hold as many
    images as there are counts and that each count is in `[0, K]`; only the
    shapes of `features` and `rois` are read. An error is an
    `InvalidArgumentError`, raised eagerly, in graphs, and under XLA where the
    lowering is a custom call (an `InternalError` with the message from a
    legacy call, TensorFlow 2.12 to 2.19); where it is HLO the counts come
    back clamped to `[0, K]` instead (docs/roi.md)."""
    return _ops.custom_ops_roi_box_counts(
        features=features, rois=rois, box_counts=box_counts
    )


@tf.RegisterGradient("CustomOps>RoiBoxCounts")
def _roi_box_counts_grad(op, grad):
    """No gradient: the output is integer, and depends on features and rois
    through their shapes only."""
    del op, grad
    return [None, None, None]
