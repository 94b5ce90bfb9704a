"""RoI pooling for detection: roi_pool, roi_align, ps_roi_pool, ps_roi_align.

The arguments mirror torchvision.ops, with TensorFlow's NHWC as the default
layout. Boxes are float `[K, 5]` rows `(batch_index, x1, y1, x2, y2)` in
input-image coordinates as the raw ops take them, or per-image boxes: `[N, K, 4]`
(padded, with `box_counts`), a `tf.RaggedTensor` `[N, None, 4]`, or a list of
`[L_i, 4]`. Per-image boxes give per-image results, bit for bit the rows the
`[K, 5]` form gives, and keep each image's boxes with it when Keras slices or
shuffles a batch.

A Python list (or tuple) is read by its elements. Elements that are rows of
numbers (flat lists, 1-D arrays or tensors) make it `[K, 5]` rows: `[[0, 0, 0,
3, 3]]` is one row. Elements that are an image's boxes (nested lists of rows,
2-D arrays or tensors, or `[]` for an image without boxes) make it a list of
per-image boxes, element `i` holding image `i`'s, of equal lengths or not:
`[[[0, 0, 3, 3]], []]` is one box in image 0 and none in image 1. Its result
is always a `tf.RaggedTensor` `[N, None, ...]`, as for ragged boxes. A list
mixing rows and per-image boxes is an error.
"""

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops import (
    load_library,
    roi_grad,  # noqa: F401 (registers the gradients)
)
from tensorflow_customops.python.ops.roi_boxes import (
    checked_row_width,
    flat_rois,
    in_xla_context,
    padding_box,
)
from tensorflow_customops.python.ops.roi_checks import (
    check_aligned,
    check_data_format,
    check_features,
    check_level_mapping,
    check_sampling_ratio,
    check_size,
    check_spatial_scale,
)
from tensorflow_customops.python.ops.roi_levels import (
    checked_pyramid,
    fpn_levels,
    pyramid_scales,
)

_ops = load_library.load_op_library()


def _apply(raw_op, features, rois, output_size, data_format, box_counts, **attrs):
    """Validates the arguments, runs `raw_op` on `[M, 5]` rows, and returns the
    result in the layout of `rois`."""
    pooled_height, pooled_width = check_size(output_size)
    data_format = check_data_format(data_format)
    attrs["spatial_scale"] = check_spatial_scale(attrs["spatial_scale"])
    if "sampling_ratio" in attrs:
        attrs["sampling_ratio"] = check_sampling_ratio(attrs["sampling_ratio"])
        attrs["aligned"] = check_aligned(attrs["aligned"])
    features = check_features(features)
    flat, restore = flat_rois(rois, box_counts, features, attrs["spatial_scale"])
    out = raw_op(
        features=features,
        rois=flat,
        pooled_height=pooled_height,
        pooled_width=pooled_width,
        data_format=data_format,
        **attrs,
    )
    return restore(out)


def roi_pool(
    features,
    rois,
    output_size,
    spatial_scale=1.0,
    data_format="NHWC",
    box_counts=None,
    name=None,
):
    """RoI max pooling (Fast R-CNN), as `torchvision.ops.roi_pool`.

    Each box, rounded to whole feature-map pixels, is split into
    `output_size` bins, and each bin takes its maximum (0 for an empty bin).

    Args:
      features: `[N, H, W, C]` (or `[N, C, H, W]` with `data_format="NCHW"`)
        tensor of type half, bfloat16, float32 or float64.
      rois: Boxes `(x1, y1, x2, y2)` in input-image coordinates: `[K, 5]`
        rows with the batch index first, `[N, K, 4]` per image (see
        `box_counts`), a `tf.RaggedTensor` `[N, None, 4]`, or a list of
        per-image `[L_i, 4]` boxes, `[]` for an image without boxes (the
        module docstring says how such a list is told from a list of rows).
        float64 boxes stay float64 with float64 features; other boxes are
        cast to float32.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates,
        e.g. 1/16 for a stride-16 feature map.
      data_format: `"NHWC"` (or `"channels_last"`) or `"NCHW"` (or
        `"channels_first"`), for both features and the output.
      box_counts: With `[N, K, 4]` rois, an int `[N]` tensor: image `n` has
        `box_counts[n]` boxes, the rest of its row is padding (any values),
        and its results are zeros. `None` means every box is real.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C]` (or `[K, C, height, width]`); `[N, K, ...]` for
      `[N, K, 4]` rois; a `RaggedTensor` `[N, None, ...]` for ragged rois and
      for a list of per-image boxes.

    Example:

    >>> features = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
    >>> tfco.roi_pool(features, [[0, 0, 0, 3, 3]], output_size=2)[0, :, :, 0]
    <tf.Tensor: shape=(2, 2), dtype=float32, numpy=
    array([[ 5.,  7.],
           [13., 15.]], dtype=float32)>
    """
    return _apply(
        lambda **kwargs: _ops.custom_ops_roi_pool(**kwargs)[0],
        features,
        rois,
        output_size,
        data_format,
        box_counts,
        spatial_scale=spatial_scale,
        name=name,
    )


def roi_align(
    features,
    rois,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    data_format="NHWC",
    box_counts=None,
    name=None,
):
    """RoI Align (Mask R-CNN), as `torchvision.ops.roi_align`.

    Each output bin averages bilinearly interpolated samples taken on a
    regular grid inside the bin; box coordinates are not rounded.

    Args:
      features: `[N, H, W, C]` (or `[N, C, H, W]` with `data_format="NCHW"`)
        tensor of type half, bfloat16, float32 or float64.
      rois: Boxes `(x1, y1, x2, y2)` in input-image coordinates: `[K, 5]`
        rows with the batch index first, `[N, K, 4]` per image (see
        `box_counts`), a `tf.RaggedTensor` `[N, None, 4]`, or a list of
        per-image `[L_i, 4]` boxes, `[]` for an image without boxes (the
        module docstring says how such a list is told from a list of rows).
        float64 boxes stay float64 with float64 features; other boxes are
        cast to float32.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      sampling_ratio: Sampling points per bin along each axis, an int at most
        64; `<= 0` uses `ceil(bin size)` points (adaptive).
      aligned: If True, shift boxes by half a pixel so that pixel centres line
        up (use this for new models); False keeps Detectron's original
        behaviour.
      data_format: `"NHWC"` (or `"channels_last"`) or `"NCHW"` (or
        `"channels_first"`), for both features and the output.
      box_counts: With `[N, K, 4]` rois, an int `[N]` tensor: image `n` has
        `box_counts[n]` boxes, the rest of its row is padding (any values),
        and its results are zeros. `None` means every box is real.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C]` (or `[K, C, height, width]`); `[N, K, ...]` for
      `[N, K, 4]` rois; a `RaggedTensor` `[N, None, ...]` for ragged rois and
      for a list of per-image boxes.

    Example:

    >>> features = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
    >>> tfco.roi_align(features, [[0, 0, 0, 2, 2]], output_size=1,
    ...                aligned=True)[0, 0, 0, 0]
    <tf.Tensor: shape=(), dtype=float32, numpy=2.5>
    """
    return _apply(
        _ops.custom_ops_roi_align,
        features,
        rois,
        output_size,
        data_format,
        box_counts,
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        aligned=aligned,
        name=name,
    )


def ps_roi_pool(
    features,
    rois,
    output_size,
    spatial_scale=1.0,
    data_format="NHWC",
    box_counts=None,
    name=None,
):
    """Position-sensitive RoI average pooling (R-FCN), as
    `torchvision.ops.ps_roi_pool`.

    The input channels form `height * width` groups; output channel `c` of
    bin `(i, j)` averages input channel `(c * height + i) * width + j` over the
    bin's whole pixels.

    Args:
      features: `[N, H, W, C]` (or NCHW) tensor, `C` divisible by
        `height * width` of `output_size`.
      rois: Boxes `(x1, y1, x2, y2)` in input-image coordinates: `[K, 5]`
        rows with the batch index first, `[N, K, 4]` per image (see
        `box_counts`), a `tf.RaggedTensor` `[N, None, 4]`, or a list of
        per-image `[L_i, 4]` boxes, `[]` for an image without boxes (the
        module docstring says how such a list is told from a list of rows).
        float64 boxes stay float64 with float64 features; other boxes are
        cast to float32.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      data_format: `"NHWC"` (or `"channels_last"`) or `"NCHW"` (or
        `"channels_first"`), for both features and the output.
      box_counts: With `[N, K, 4]` rois, an int `[N]` tensor: image `n` has
        `box_counts[n]` boxes, the rest of its row is padding (any values),
        and its results are zeros. `None` means every box is real.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C / (height * width)]` (or NCHW), per image as for
      `roi_pool`.

    Example:

    >>> features = tf.ones([1, 4, 4, 8])
    >>> tfco.ps_roi_pool(features, [[0, 0, 0, 4, 4]], output_size=2).shape
    TensorShape([1, 2, 2, 2])
    """
    return _apply(
        _ops.custom_ops_ps_roi_pool,
        features,
        rois,
        output_size,
        data_format,
        box_counts,
        spatial_scale=spatial_scale,
        name=name,
    )


def ps_roi_align(
    features,
    rois,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=True,
    data_format="NHWC",
    box_counts=None,
    name=None,
):
    """Position-sensitive RoI Align, as `torchvision.ops.ps_roi_align`.

    `ps_roi_pool`'s channel groups with `roi_align`'s bilinear sampling.

    Args:
      features: `[N, H, W, C]` (or NCHW) tensor, `C` divisible by
        `height * width` of `output_size`.
      rois: Boxes `(x1, y1, x2, y2)` in input-image coordinates: `[K, 5]`
        rows with the batch index first, `[N, K, 4]` per image (see
        `box_counts`), a `tf.RaggedTensor` `[N, None, 4]`, or a list of
        per-image `[L_i, 4]` boxes, `[]` for an image without boxes (the
        module docstring says how such a list is told from a list of rows).
        float64 boxes stay float64 with float64 features; other boxes are
        cast to float32.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      sampling_ratio: Sampling points per bin along each axis, an int at most
        64; `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel, as torchvision does (the
        default); False samples at the unshifted coordinates. Boxes are never
        enlarged to 1x1, unlike `roi_align(aligned=False)`.
      data_format: `"NHWC"` (or `"channels_last"`) or `"NCHW"` (or
        `"channels_first"`), for both features and the output.
      box_counts: With `[N, K, 4]` rois, an int `[N]` tensor: image `n` has
        `box_counts[n]` boxes, the rest of its row is padding (any values),
        and its results are zeros. `None` means every box is real.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C / (height * width)]` (or NCHW), per image as for
      `roi_pool`.

    Example:

    >>> features = tf.ones([1, 4, 4, 8])
    >>> tfco.ps_roi_align(features, [[0, 0, 0, 4, 4]], output_size=2)[0, 0, 0]
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 1.], dtype=float32)>
    """
    return _apply(
        _ops.custom_ops_ps_roi_align,
        features,
        rois,
        output_size,
        data_format,
        box_counts,
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        aligned=aligned,
        name=name,
    )


def multi_scale_roi_align(
    features,
    rois,
    output_size,
    spatial_scales=None,
    image_size=None,
    sampling_ratio=-1,
    aligned=False,
    canonical_scale=224,
    canonical_level=4,
    data_format="NHWC",
    box_counts=None,
    name=None,
):
    """RoI Align over a feature pyramid, as `torchvision.ops.MultiScaleRoIAlign`.

    Each box is pooled from one level, chosen by its size as in the FPN paper
    (eq. 1): level `floor(canonical_level + log2(sqrt(area) / canonical_scale)
    + 1e-6)`, clamped to the levels given. A box with a negative area goes to
    the finest level.

    Args:
      features: A list of feature maps, finest first, one per pyramid level:
        `[N, H_l, W_l, C]` (or NCHW), each half the size of the one before, of
        one dtype and channel count.
      rois: Boxes, in the forms `roi_align` takes.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scales: The factor from box to feature-map coordinates of each
        level, powers of two, each half the one before (`[1/4, 1/8, 1/16]`).
        `None` infers them, as torchvision does, from `image_size` and the
        feature maps' static heights: `2 ** round(log2(H_l / image height))`.
      image_size: `(height, width)` of the (padded) input images, used only to
        infer `spatial_scales`.
      sampling_ratio: As in `roi_align`.
      aligned: As in `roi_align`; False, as in torchvision's module.
      canonical_scale: Box size (the square root of its area) that maps to
        `canonical_level`, a positive int.
      canonical_level: Level (an int) of a box of size `canonical_scale`; a
        level's number is `-log2(spatial_scale)`.
      data_format: As in `roi_align`.
      box_counts: As in `roi_align`.
      name: A name for the operation (optional).

    Returns:
      As `roi_align`: one pooled result per box, in the layout of `rois`.

    Example:

    >>> features = [tf.ones([1, 16, 16, 2]), 2 * tf.ones([1, 8, 8, 2])]
    >>> boxes = [[0, 0, 0, 8, 8], [0, 0, 0, 60, 60]]
    >>> pooled = tfco.multi_scale_roi_align(
    ...     features, boxes, 1, spatial_scales=[1 / 4, 1 / 8], canonical_scale=32,
    ...     canonical_level=3)
    >>> pooled[:, 0, 0, 0]
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>
    """
    if isinstance(features, (tf.Tensor, np.ndarray)) or not isinstance(
        features, (list, tuple)
    ):
        raise TypeError(
            "features must be a list of feature maps, one per pyramid level, got "
            f"{type(features).__name__}"
        )
    if not features:
        raise ValueError("features must hold at least one feature map")
    features = [check_features(f) for f in features]
    data_format = check_data_format(data_format)
    features = checked_pyramid(features, data_format)
    scales = pyramid_scales(features, spatial_scales, image_size, data_format)
    canonical_scale, canonical_level = check_level_mapping(
        canonical_scale, canonical_level
    )
    attrs = {
        "output_size": output_size,
        "sampling_ratio": check_sampling_ratio(sampling_ratio),
        "aligned": check_aligned(aligned),
        "data_format": data_format,
    }
    with tf.name_scope(name or "multi_scale_roi_align"):
        if len(features) == 1:
            return roi_align(
                features[0],
                rois,
                spatial_scale=scales[0],
                box_counts=box_counts,
                **attrs,
            )
        check_size(output_size)
        flat, restore = flat_rois(rois, box_counts, features[0], min(scales))
        flat = checked_row_width(flat)
        levels = fpn_levels(
            flat[:, 1:], scales, float(canonical_scale), float(canonical_level)
        )
        off_map = padding_box(flat.dtype, min(scales))
        if in_xla_context() and off_map is not None:
            return restore(
                _pool_levels_in_place(features, flat, levels, scales, off_map, attrs)
            )
        count = len(features)
        positions = tf.dynamic_partition(tf.range(tf.shape(flat)[0]), levels, count)
        level_rois = tf.dynamic_partition(flat, levels, count)
        pooled = [
            roi_align(f, r, spatial_scale=s, **attrs)
            for f, r, s in zip(features, level_rois, scales)
        ]
        return restore(tf.dynamic_stitch(positions, pooled))


def _pool_levels_in_place(features, flat, levels, scales, off_map, attrs):
    """multi_scale_roi_align's pooling for XLA: each level pools every row,
    those of other levels moved to the box `off_map` (pooled to zeros, at the
    cost of writing them), and each row keeps its own level's result. XLA
    gives DynamicPartition's outputs dynamic sizes, and DynamicStitch needs
    its indices when it compiles, so the partitioned form compiles only with
    the boxes as compile-time constants: once for every new set of boxes."""
    result = None
    for level, (f, scale) in enumerate(zip(features, scales)):
        here = tf.equal(levels, level)
        rows = tf.concat(
            [flat[:, :1], tf.where(here[:, tf.newaxis], flat[:, 1:], off_map)], 1
        )
        pooled = roi_align(f, rows, spatial_scale=scale, **attrs)
        here = tf.reshape(here, [-1, 1, 1, 1])
        result = pooled if result is None else tf.where(here, pooled, result)
    return result
