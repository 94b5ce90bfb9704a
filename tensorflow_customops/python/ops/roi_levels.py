"""The feature pyramid of multi_scale_roi_align: its checks, its levels'
scales, and the level each box is pooled from."""

import math

import tensorflow as tf

from tensorflow_customops.python.ops.check_condition_ops import check_condition
from tensorflow_customops.python.ops.roi_checks import check_size, check_spatial_scales


def checked_pyramid(features, data_format):
    """`features`, checked to share a dtype, a channel count and a batch size;
    a batch size known only when the graph runs is checked then, by
    CustomOps>CheckCondition, on whose outputs the levels are pooled."""
    dtypes = {f.dtype for f in features}
    if len(dtypes) > 1:
        raise TypeError(
            f"features must share one dtype, got {sorted(d.name for d in dtypes)}"
        )
    axis = 3 if data_format == "NHWC" else 1
    channels = {f.shape[axis] for f in features} - {None}
    if len(channels) > 1:
        raise ValueError(
            f"features must share one channel count, got {sorted(channels)}"
        )
    batches = [f.shape[0] if f.shape.rank is not None else None for f in features]
    known = {n for n in batches if n is not None}
    if len(known) > 1:
        sizes = ", ".join(f"features[{i}] {n}" for i, n in enumerate(batches))
        raise ValueError(f"features must share one batch size, got {sizes}")
    if len(features) == 1 or None not in batches:
        return features
    sizes = tf.stack([tf.shape(f)[0] for f in features])
    return check_condition(
        tf.reduce_all(tf.equal(sizes, sizes[0])),
        features,
        "features must share one batch size",
    )


def pyramid_scales(features, spatial_scales, image_size, data_format):
    """Validated per-level scales: powers of two, halving from level to level."""
    if image_size is not None:
        height, _ = check_size(image_size, "image_size")
    if spatial_scales is None:
        if image_size is None:
            raise ValueError(
                "multi_scale_roi_align needs spatial_scales, or image_size to "
                "infer them from the feature maps' heights"
            )
        axis = 1 if data_format == "NHWC" else 2
        spatial_scales = []
        for level, f in enumerate(features):
            if f.shape.rank is None or f.shape[axis] is None:
                raise ValueError(
                    f"cannot infer spatial_scales: features[{level}] has an "
                    f"unknown height ({f.shape}); pass spatial_scales"
                )
            spatial_scales.append(2.0 ** round(math.log2(f.shape[axis] / height)))
    scales = check_spatial_scales(spatial_scales)
    if len(scales) != len(features):
        raise ValueError(
            f"spatial_scales must hold one scale per feature map ({len(features)}), "
            f"got {len(scales)}"
        )
    return scales


def fpn_levels(boxes, scales, canonical_scale, canonical_level):
    """Index into `scales` of each box's pyramid level (torchvision's
    LevelMapper, in the boxes' dtype)."""
    first, last = -math.log2(scales[0]), -math.log2(scales[-1])
    x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
    size = tf.sqrt((x2 - x1) * (y2 - y1))
    level = tf.floor(
        canonical_level + tf.math.log(size / canonical_scale) / math.log(2.0) + 1e-6
    )
    level = tf.where(tf.math.is_nan(level), tf.constant(first, level.dtype), level)
    return tf.cast(tf.clip_by_value(level, first, last) - first, tf.int32)
