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

import math
import numbers

import numpy as np
import tensorflow as tf
from tensorflow.python import pywrap_tfe

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.check_condition_ops import check_condition
from tensorflow_customops.python.ops.roi_box_counts_ops import checked_box_counts

_ops = load_library.load_op_library()

_POOL_ATTRS = ("pooled_height", "pooled_width", "spatial_scale", "data_format")
_ALIGN_ATTRS = (*_POOL_ATTRS, "sampling_ratio", "aligned")
_PS_ALIGN_ATTRS = _ALIGN_ATTRS

# The kernels' limit (kMaxSamplingRatio in core/kernels/roi_ops_common.h).
_MAX_SAMPLING_RATIO = 64
FEATURE_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
# Keras' names map onto TensorFlow's.
_DATA_FORMATS = {
    "NHWC": "NHWC",
    "NCHW": "NCHW",
    "channels_last": "NHWC",
    "channels_first": "NCHW",
}
_BOX_FORMATS = (
    "[K, 5] rows (batch_index, x1, y1, x2, y2), [N, K, 4] per-image boxes, a "
    "RaggedTensor [N, None, 4], or a list of per-image [L_i, 4] boxes"
)


def check_size(size, name="output_size"):
    """(height, width) from an int or a pair of ints, all positive; errors
    name the argument `name`."""
    if isinstance(size, (tf.Tensor, tf.Variable)):
        raise TypeError(
            f"{name} must be a Python int or a pair of ints (it sets the op's "
            f"attributes, so it cannot be a tensor), got {size!r}"
        )
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        pair = (int(size), int(size))
    elif (
        isinstance(size, (list, tuple))
        and len(size) == 2
        and all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in size
        )
    ):
        pair = (int(size[0]), int(size[1]))
    else:
        raise TypeError(f"{name} must be an int or a pair of ints, got {size!r}")
    if min(pair) <= 0:
        raise ValueError(f"{name} must be positive, got {size!r}")
    return pair


def check_data_format(data_format):
    """ "NHWC" or "NCHW" for any of TensorFlow's or Keras' names."""
    try:
        return _DATA_FORMATS[data_format]
    except (KeyError, TypeError):
        raise ValueError(
            "data_format must be 'NHWC' or 'channels_last', or 'NCHW' or "
            f"'channels_first', got {data_format!r}"
        ) from None


def _check_int(value, name):
    # bool is an Integral, but True is no count.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(value)


def check_spatial_scale(spatial_scale):
    """A finite positive float, also in float32 (the op's attribute type)."""
    if isinstance(spatial_scale, bool) or not isinstance(spatial_scale, numbers.Real):
        raise TypeError(f"spatial_scale must be a number, got {spatial_scale!r}")
    with np.errstate(over="ignore"):
        as_float32 = np.float32(spatial_scale)
    if not 0 < as_float32 < np.inf:
        raise ValueError(
            "spatial_scale must be a finite positive number (in float32), got "
            f"{spatial_scale!r}"
        )
    return float(spatial_scale)


def check_sampling_ratio(sampling_ratio):
    """An int at most 64 (the kernels' kMaxSamplingRatio), that fits the op's
    int32 attribute."""
    sampling_ratio = _check_int(sampling_ratio, "sampling_ratio")
    if sampling_ratio > _MAX_SAMPLING_RATIO:
        raise ValueError(
            f"sampling_ratio must be at most {_MAX_SAMPLING_RATIO} (or <= 0 for "
            f"an adaptive grid), got {sampling_ratio}"
        )
    if sampling_ratio < -(2**31):
        raise ValueError(
            "sampling_ratio must be at least -2**31 (any value <= 0 means an "
            f"adaptive grid), got {sampling_ratio}"
        )
    return sampling_ratio


def check_aligned(aligned):
    if not isinstance(aligned, (bool, np.bool_)):
        raise TypeError(f"aligned must be a bool, got {aligned!r}")
    return bool(aligned)


def check_level_mapping(canonical_scale, canonical_level):
    """(canonical_scale, canonical_level) of the FPN level mapping: ints, the
    scale positive."""
    canonical_scale = _check_int(canonical_scale, "canonical_scale")
    canonical_level = _check_int(canonical_level, "canonical_level")
    if canonical_scale <= 0:
        raise ValueError(f"canonical_scale must be positive, got {canonical_scale}")
    return canonical_scale, canonical_level


def check_spatial_scales(spatial_scales):
    """Per-level scales as floats: powers of two, each half the one before."""
    if isinstance(spatial_scales, (tf.Tensor, np.ndarray)) or not isinstance(
        spatial_scales, (list, tuple)
    ):
        raise TypeError(
            f"spatial_scales must be a list of numbers, got {spatial_scales!r}"
        )
    scales = list(spatial_scales)
    for level, scale in enumerate(scales):
        if (
            isinstance(scale, bool)
            or not isinstance(scale, numbers.Real)
            or not (0 < scale < math.inf)
            or not math.log2(scale).is_integer()
            or (level and scale * 2 != scales[level - 1])
        ):
            raise ValueError(
                "spatial_scales must be powers of two, each half the one before "
                f"(finest level first), got {scales!r}"
            )
    return [float(s) for s in scales]


def _check_features(features):
    features = tf.convert_to_tensor(features)
    if features.dtype not in FEATURE_DTYPES:
        raise TypeError(
            "features must be float16, bfloat16, float32 or float64, got "
            f"{features.dtype.name}; cast them first"
        )
    if features.shape.rank not in (None, 4):
        raise ValueError(
            f"features must have rank 4 (NHWC or NCHW), got shape {features.shape}"
        )
    return features


_ARRAYS = (tf.Tensor, tf.Variable, np.ndarray)


def _rank(array):
    shape = array.shape
    return shape.rank if isinstance(shape, tf.TensorShape) else len(shape)


def _is_sequence(value):
    if isinstance(value, _ARRAYS):
        return _rank(value) != 0
    return isinstance(value, (list, tuple))


def _is_row(element):
    """For an element of a list of boxes: True for a row of numbers, False for
    an image's boxes (2-D, of unknown rank, or `[]`), None for neither."""
    if not _is_sequence(element):
        return None
    if isinstance(element, _ARRAYS):
        return _rank(element) == 1
    return bool(element) and not _is_sequence(element[0])


def _leading_dim(tensor, axis=0):
    static = tensor.shape[axis]
    return static if static is not None else tf.shape(tensor)[axis]


def _image_count_known(num_images, features):
    """Whether the images of batched boxes (`num_images`) and of `features`
    are both known now; raises if they differ (boxes name their images by
    position, so there must be N of them)."""
    features_n = features.shape[0]
    if not isinstance(num_images, int) or features_n is None:
        return False
    if num_images != features_n:
        raise ValueError(
            f"rois holds boxes for {num_images} images but features holds {features_n}"
        )
    return True


def _check_image_count(num_images, features):
    """The checks to run before boxes for `num_images` images are pooled from
    `features`: none where both image counts are known now (a difference
    raises now), else CustomOps>RoiBoxCounts on no boxes, which raises when
    it runs, or when XLA compiles it."""
    if features is None or _image_count_known(num_images, features):
        return []
    return [
        checked_box_counts(
            features,
            tf.zeros([num_images, 0, 4]),
            tf.zeros([num_images], tf.int32),
        )
    ]


def _flat_rois(rois, box_counts, features, spatial_scale):
    """The `[M, 5]` rows the ops take, and a function from the ops' `[M, ...]`
    result back to the layout of `rois`; `spatial_scale` is the smallest the
    rows are pooled at."""
    if isinstance(rois, tf.RaggedTensor):
        if box_counts is not None:
            raise ValueError(
                "box_counts must be None for RaggedTensor rois (their row "
                "lengths are the counts)"
            )
        if rois.ragged_rank != 1 or rois.shape.rank != 3 or rois.shape[2] != 4:
            raise ValueError(
                f"RaggedTensor rois must have shape [N, None, 4], got {rois.shape}"
            )
        num_images = rois.shape[0]
        if num_images is None:
            num_images = rois.nrows(out_type=tf.int32)
        checks = _check_image_count(num_images, features)
        values = tf.cast(rois.flat_values, _box_dtype([rois.dtype], features))
        if tf.executing_eagerly():
            flat = _concrete_rows(values, np.diff(rois.row_splits))
        else:
            index = tf.cast(rois.value_rowids(), values.dtype)[:, tf.newaxis]
            with tf.control_dependencies(checks):
                flat = tf.concat([index, values], 1)
        return flat, rois.with_values
    rois = box_tensors(rois)
    if isinstance(rois, list):
        return _flat_box_list(rois, box_counts, features)
    rois = tf.convert_to_tensor(rois)
    if not (rois.dtype.is_floating or rois.dtype.is_integer):
        raise TypeError(f"rois must be numbers, got {rois.dtype.name}")
    rois = tf.cast(rois, _box_dtype([rois.dtype], features))
    rank = rois.shape.rank
    if rank == 3 and rois.shape[2] in (None, 4):
        return _flat_batched_rois(rois, box_counts, features, spatial_scale)
    if rank not in (None, 2) or (rank == 2 and rois.shape[1] not in (None, 5)):
        raise ValueError(
            f"rois must have shape [K, 5] or [N, K, 4] ({_BOX_FORMATS}), got "
            f"shape {rois.shape}"
        )
    if box_counts is not None:
        raise ValueError("box_counts needs [N, K, 4] rois, got [K, 5] rows")
    return rois, lambda out: out


def _box_dtype(dtypes, features):
    """The dtype of the `[M, 5]` rows made from boxes of `dtypes`: float64
    where the features are float64 and some boxes are (the others convert
    exactly), as the ops take float64 boxes with float64 features only;
    float32 otherwise, which other features compute their boxes in."""
    if features is not None and features.dtype == tf.float64:
        if any(dtype == tf.float64 for dtype in dtypes):
            return tf.float64
    return tf.float32


def box_tensors(rois):
    """`rois` with its Python lists made tensors: a list of per-image boxes
    becomes a list of `[L_i, 4]` tensors (float64 or float32), any other list
    one tensor; other forms come back as they are."""
    if not isinstance(rois, (list, tuple)):
        return rois
    if not rois:
        raise ValueError(
            "rois is an empty list: give np.zeros([0, 5]) for no [K, 5] rows, "
            "or one list of boxes per image ([] for an image without boxes)"
        )
    rows = [_is_row(element) for element in rois]
    if True in rows and False in rows:
        raise ValueError(
            "rois mixes [5] rows (batch_index, x1, y1, x2, y2) with per-image "
            f"[L, 4] boxes: rois[{rows.index(True)}] is a row and "
            f"rois[{rows.index(False)}] an image's boxes"
        )
    if not any(rows) and None not in rows:
        return [_image_boxes(boxes, index) for index, boxes in enumerate(rois)]
    try:
        return tf.convert_to_tensor(rois)
    except (TypeError, ValueError) as error:
        raise ValueError(f"rois must be {_BOX_FORMATS}: {error}") from None


def _image_boxes(boxes, index):
    """Image `index`'s boxes in a list of per-image boxes, as a float64 or
    float32 `[L, 4]` tensor."""
    if isinstance(boxes, (list, tuple)) and not boxes:
        return tf.zeros([0, 4])
    try:
        boxes = tf.convert_to_tensor(boxes)
    except (TypeError, ValueError) as error:
        raise ValueError(f"rois[{index}] must have shape [L, 4]: {error}") from None
    if not (boxes.dtype.is_floating or boxes.dtype.is_integer):
        raise TypeError(f"rois[{index}] must be numbers, got {boxes.dtype.name}")
    if boxes.shape.rank not in (None, 2) or boxes.shape[-1] not in (None, 4):
        raise ValueError(f"rois[{index}] must have shape [L, 4], got {boxes.shape}")
    return boxes if boxes.dtype == tf.float64 else tf.cast(boxes, tf.float32)


def _flat_box_list(rois, box_counts, features):
    """`_flat_rois` for the tensors of `box_tensors`; the result is ragged."""
    if box_counts is not None:
        raise ValueError(
            "box_counts must be None for a list of per-image boxes (their lengths "
            "are the counts)"
        )
    checks = _check_image_count(len(rois), features)
    dtype = _box_dtype([boxes.dtype for boxes in rois], features)
    rows, lengths = [], []
    for index, boxes in enumerate(rois):
        count = tf.shape(boxes, out_type=tf.int64)[0]
        lengths.append(count)
        image = tf.fill([count, 1], tf.constant(index, dtype))
        rows.append(tf.concat([image, tf.cast(boxes, dtype)], axis=1))
    with tf.control_dependencies(checks):
        flat = tf.concat(rows, axis=0)
    row_lengths = tf.stack(lengths)
    return flat, lambda out: tf.RaggedTensor.from_row_lengths(
        out, row_lengths, validate=False
    )


def _flat_batched_rois(rois, box_counts, features, spatial_scale):
    num_images, boxes_per_image = _leading_dim(rois), _leading_dim(rois, 1)
    if box_counts is None:
        checks = _check_image_count(num_images, features)
    else:
        box_counts = tf.convert_to_tensor(box_counts)
        if not box_counts.dtype.is_integer:
            raise TypeError(f"box_counts must be integers, got {box_counts.dtype.name}")
        if box_counts.shape.rank not in (None, 1):
            raise ValueError(f"box_counts must have shape [N], got {box_counts.shape}")
        if box_counts.dtype not in (tf.int32, tf.int64):
            # Saturated, so that no count wraps around into [0, K].
            box_counts = tf.saturate_cast(box_counts, tf.int64)
        _image_count_known(num_images, features)
        # The op checks the images and counts eagerly, in graphs and under XLA.
        box_counts, checks = checked_box_counts(features, rois, box_counts), []
    if tf.executing_eagerly():
        return _concrete_batched_rois(
            rois, None if box_counts is None else box_counts.numpy(), spatial_scale
        )

    def result_shape(out):
        return [num_images, boxes_per_image, *(_leading_dim(out, a) for a in (1, 2, 3))]

    if box_counts is None:
        index = tf.repeat(tf.range(num_images), boxes_per_image)
        with tf.control_dependencies(checks):
            flat = tf.concat(
                [tf.cast(index, rois.dtype)[:, tf.newaxis], tf.reshape(rois, [-1, 4])],
                1,
            )
        return flat, lambda out: tf.reshape(out, result_shape(out))

    # (image, box) of every box that is not padding, image-major.
    where = tf.where(tf.sequence_mask(box_counts, boxes_per_image))
    flat = tf.concat([tf.cast(where[:, :1], rois.dtype), tf.gather_nd(rois, where)], 1)

    def restore(out):
        shape = tf.cast(tf.stack(result_shape(out)), tf.int64)
        restored = tf.scatter_nd(where, out, shape)
        restored.set_shape([rois.shape[0], rois.shape[1], *out.shape[1:]])
        return restored

    return flat, restore


def _autodiff_records():
    """Whether a GradientTape or ForwardAccumulator records the ops run now
    (TensorFlow's own test, private but in every release the wheel serves)."""
    return not pywrap_tfe.TFE_Py_TapeSetIsEmpty()


def _concrete_rows(boxes, box_counts, padding=None, padding_box=None):
    """The `[M, 5]` rows of eager boxes `[..., 4]`, `box_counts[n]` of image n
    after those of the images before it; rows where the NumPy mask `padding`
    holds become `padding_box`, or are left out when it is None. Built in
    NumPy, unless autodiff records: then the batch indices are joined to the
    boxes by ops, through which the boxes' gradient flows."""
    index = np.repeat(
        np.arange(len(box_counts), dtype=boxes.dtype.as_numpy_dtype), box_counts
    )
    recording = _autodiff_records()
    values = tf.reshape(boxes, [-1, 4]) if recording else boxes.numpy().reshape(-1, 4)
    if padding is not None and padding_box is None:
        real = np.flatnonzero(~padding)
        values = tf.gather(values, real) if recording else values[real]
    elif padding is not None:
        where = tf.where if recording else np.where
        values = where(padding[:, np.newaxis], padding_box, values)
    if recording:
        return tf.concat([index[:, np.newaxis], values], 1)
    return tf.constant(np.concatenate([index[:, np.newaxis], values], 1))


def _concrete_batched_rois(boxes, box_counts, spatial_scale):
    """`_flat_batched_rois` for eager `boxes` and NumPy `box_counts`: indices
    and checks in NumPy, since every TensorFlow op costs an eager dispatch of
    its own, and one op to restore the result. Padding boxes are pooled too,
    moved off the map where every op gives them zeros (4 pixels before its
    corner at `spatial_scale`, where a box's samples are all dropped and its
    bins empty), so the result is a reshape of the rows' with no copy."""
    num_images, boxes_per_image = boxes.shape[:2]
    rows = np.full(num_images, boxes_per_image)

    def restore(out):
        # NumPy, in int32 where it fits: TensorFlow would pack a list into a
        # tensor op by op, and takes an int64 shape more slowly.
        dims = [num_images, boxes_per_image, *out.shape.as_list()[1:]]
        return tf.reshape(
            out, np.array(dims, np.int32 if max(dims) < 2**31 else np.int64)
        )

    if box_counts is None:
        return _concrete_rows(boxes, rows), restore
    counts = box_counts.tolist()  # checked by CustomOps>RoiBoxCounts
    padding = (np.arange(boxes_per_image) >= box_counts[:, np.newaxis]).reshape(-1)
    if not padding.any():
        return _concrete_rows(boxes, rows), restore
    with np.errstate(over="ignore"):
        box = np.full(4, -4.0 / spatial_scale, boxes.dtype.as_numpy_dtype)
    if np.isfinite(box).all():
        return _concrete_rows(boxes, rows, padding, box), restore

    # A spatial_scale below about 2^-126 leaves no float32 box off the map:
    # pool the real boxes only, and copy their results into a zero-filled
    # padded tensor.
    def pad(out):
        dims = [num_images, boxes_per_image, *out.shape.as_list()[1:]]
        return tf.raw_ops.RaggedTensorToTensor(
            shape=np.array(dims, np.int64),
            values=out,
            default_value=np.zeros([], out.dtype.as_numpy_dtype),
            row_partition_tensors=[np.cumsum([0, *counts])],
            row_partition_types=["ROW_SPLITS"],
        )

    return _concrete_rows(boxes, box_counts, padding), pad


def _apply(raw_op, features, rois, output_size, data_format, box_counts, **attrs):
    """Validates the arguments, runs `raw_op` on `[M, 5]` rows, and returns the
    result in the layout of `rois`."""
    pooled_height, pooled_width = check_size(output_size)
    data_format = check_data_format(data_format)
    attrs["spatial_scale"] = check_spatial_scale(attrs["spatial_scale"])
    if "sampling_ratio" in attrs:
        attrs["sampling_ratio"] = check_sampling_ratio(attrs["sampling_ratio"])
        attrs["aligned"] = check_aligned(attrs["aligned"])
    features = _check_features(features)
    flat, restore = _flat_rois(rois, box_counts, features, attrs["spatial_scale"])
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
    features = [_check_features(f) for f in features]
    data_format = check_data_format(data_format)
    _check_pyramid(features, data_format)
    scales = _pyramid_scales(features, spatial_scales, image_size, data_format)
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
        flat, restore = _flat_rois(rois, box_counts, features[0], min(scales))
        levels = _fpn_levels(
            flat[:, 1:], scales, float(canonical_scale), float(canonical_level)
        )
        count = len(features)
        positions = tf.dynamic_partition(tf.range(tf.shape(flat)[0]), levels, count)
        level_rois = tf.dynamic_partition(flat, levels, count)
        pooled = [
            roi_align(f, r, spatial_scale=s, **attrs)
            for f, r, s in zip(features, level_rois, scales)
        ]
        return restore(tf.dynamic_stitch(positions, pooled))


def _check_pyramid(features, data_format):
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


def _pyramid_scales(features, spatial_scales, image_size, data_format):
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


def _fpn_levels(boxes, scales, canonical_scale, canonical_level):
    """Index into `scales` of each box's pyramid level (torchvision's
    LevelMapper, in the boxes' dtype)."""
    first, last = -math.log2(scales[0]), -math.log2(scales[-1])
    x1, y1, x2, y2 = tf.unstack(boxes, axis=1)
    size = tf.sqrt((x2 - x1) * (y2 - y1))
    level = tf.floor(
        canonical_level + tf.math.log(size / canonical_scale) / math.log(2.0) + 1e-6
    )
    level = tf.where(tf.math.is_nan(level), first, level)
    return tf.cast(tf.clip_by_value(level, first, last) - first, tf.int32)


def _skipped(op, index):
    """Whether autodiff needs no gradient for input `index` of `op` (eager
    only: TensorFlow names the inputs nothing is watching)."""
    return index in (getattr(op, "skip_input_indices", None) or ())


def _box_gradient(op, box_grad_op, grads, features, rois, attrs):
    """d(rois) of `op`, whose rois are input 1: None when autodiff needs none,
    zeros for the pooling kinds (no `box_grad_op`), else the box gradient op
    fed `grads` and `features`."""
    if _skipped(op, 1):
        return None
    if box_grad_op is None:
        return tf.zeros_like(rois)
    return box_grad_op(grads=grads, features=features, rois=rois, **attrs)


def _register_gradient(op_type, grad_op, attr_names, box_grad_op=None):
    """Registers the Python gradient of a RoI op: d(features) from its gradient
    op, and d(rois) from its box gradient op. The pooling kinds round boxes to
    whole pixels, so their output is piecewise constant in the coordinates and
    their box gradient is zero (where it exists)."""

    @tf.RegisterGradient(op_type)
    def _grad(op, grad, *_):
        attrs = {name: op.get_attr(name) for name in attr_names}
        features, rois = op.inputs[0], op.inputs[1]
        grad_features = None
        if not _skipped(op, 0):
            argmax = {"argmax": op.outputs[1]} if len(op.outputs) > 1 else {}
            grad_features = grad_op(
                grads=grad,
                rois=rois,
                features_shape=tf.shape(features, out_type=tf.int32),
                **argmax,
                **attrs,
            )
        grad_rois = _box_gradient(op, box_grad_op, grad, features, rois, attrs)
        return [grad_features, grad_rois]


_register_gradient("CustomOps>RoiPool", _ops.custom_ops_roi_pool_grad, _POOL_ATTRS)
_register_gradient(
    "CustomOps>RoiAlign",
    _ops.custom_ops_roi_align_grad,
    _ALIGN_ATTRS,
    _ops.custom_ops_roi_align_grad_boxes,
)
_register_gradient("CustomOps>PsRoiPool", _ops.custom_ops_ps_roi_pool_grad, _POOL_ATTRS)
_register_gradient(
    "CustomOps>PsRoiAlign",
    _ops.custom_ops_ps_roi_align_grad,
    _PS_ALIGN_ATTRS,
    _ops.custom_ops_ps_roi_align_grad_boxes,
)


def _gather_at_argmax(features, rois, argmax, data_format):
    """`features` at RoiPool's argmax positions (0 for empty bins): the adjoint
    of RoiPoolGrad in its incoming gradient."""
    shape = tf.shape(features, out_type=tf.int64)
    image = tf.cast(rois[:, 0], tf.int64)[:, None, None, None]
    position = tf.cast(argmax, tf.int64)
    if data_format == b"NHWC" or data_format == "NHWC":
        _, height, width, channels = tf.unstack(shape)
        channel = tf.range(channels)
        index = (image * height * width + position) * channels + channel
    else:
        _, channels, height, width = tf.unstack(shape)
        channel = tf.range(channels)[:, None, None]
        index = (image * channels + channel) * height * width + position
    # Empty bins read an appended zero, so an empty map needs no special case.
    values = tf.concat([tf.reshape(features, [-1]), tf.zeros([1], features.dtype)], 0)
    index = tf.where(argmax >= 0, index, tf.size(features, out_type=tf.int64))
    return tf.gather(values, index)


def _register_second_order(grad_op_type, forward_op, attr_names, box_grad_op=None):
    """Registers the gradient of a RoI gradient op. It is linear in its
    incoming gradient, so its own gradient is the forward op (for RoiPoolGrad,
    the gather at argmax). With respect to rois, <h, Grad(g, rois)> is
    <Forward(h, rois), g>, whose box gradient is the box gradient op fed g and
    h; the pooling kinds' is zero. argmax and features_shape get none."""

    @tf.RegisterGradient(grad_op_type)
    def _grad(op, grad):
        attrs = {name: op.get_attr(name) for name in attr_names}
        grads, rois = op.inputs[0], op.inputs[1]
        grad_rois = _box_gradient(op, box_grad_op, grads, grad, rois, attrs)
        if forward_op is None:
            pooled = _gather_at_argmax(grad, rois, op.inputs[2], attrs["data_format"])
            return [pooled, grad_rois, None, None]
        return [forward_op(features=grad, rois=rois, **attrs), grad_rois, None]


_register_second_order("CustomOps>RoiPoolGrad", None, _POOL_ATTRS)
_register_second_order(
    "CustomOps>RoiAlignGrad",
    _ops.custom_ops_roi_align,
    _ALIGN_ATTRS,
    _ops.custom_ops_roi_align_grad_boxes,
)
_register_second_order(
    "CustomOps>PsRoiPoolGrad", _ops.custom_ops_ps_roi_pool, _POOL_ATTRS
)
_register_second_order(
    "CustomOps>PsRoiAlignGrad",
    _ops.custom_ops_ps_roi_align,
    _PS_ALIGN_ATTRS,
    _ops.custom_ops_ps_roi_align_grad_boxes,
)


def _known_zero(tensor):
    """Whether `tensor` is zero by construction: the upstream gradient autodiff
    feeds an output nothing depends on (in a function's gradient, say)."""
    if not isinstance(tensor, tf.Tensor):
        return tensor is None
    if not tf.executing_eagerly() and tensor.op.type == "ZerosLike":
        return True
    value = tf.get_static_value(tensor)
    return value is not None and not np.any(value)


def _zeros_unless(op, nonzero, message):
    """Zero gradients for `op`'s inputs, or, if the scalar `nonzero` is true,
    an InvalidArgumentError with `message`: raised as is in eager mode, at
    run time by CustomOps>CheckCondition in a graph and under XLA (where the
    program can raise: docs/xla.md)."""
    if tf.executing_eagerly():
        if nonzero:
            raise tf.errors.InvalidArgumentError(None, None, message)
        return [tf.zeros_like(x) for x in op.inputs]
    return check_condition(
        tf.logical_not(nonzero), [tf.zeros_like(x) for x in op.inputs], message
    )


def _register_box_gradient_error(op_type):
    """The box gradient ops' own gradient (a second derivative through box
    coordinates) is not implemented. A function's gradient differentiates
    every output, so a traced gradient of one cannot raise: it checks at run
    time that nothing flows in (and then is zero), and raises otherwise,
    rather than let autodiff treat it as zero."""
    message = (
        f"{op_type} has no gradient: second derivatives through RoI box "
        "coordinates are not implemented (stop the gradient at the boxes, e.g. "
        "tf.stop_gradient(boxes), for higher-order gradients with respect to "
        "the features)"
    )

    @tf.RegisterGradient(op_type)
    def _grad(op, grad):
        if _known_zero(grad):
            return [None] * len(op.inputs)
        return _zeros_unless(op, tf.reduce_any(tf.not_equal(grad, 0)), message)


_register_box_gradient_error("CustomOps>RoiAlignGradBoxes")
_register_box_gradient_error("CustomOps>PsRoiAlignGradBoxes")
