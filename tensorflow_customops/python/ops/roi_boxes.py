"""The box forms of the RoI functions: `[K, 5]` rows, `[N, K, 4]` per-image
boxes (with `box_counts`), a `tf.RaggedTensor` `[N, None, 4]` or a list of
per-image boxes (roi_ops.py's docstring says how a list is read), made into
the `[M, 5]` rows the ops take, with the function that gives their results
back in the layout of the boxes."""

import numpy as np
import tensorflow as tf
from tensorflow.python import pywrap_tfe
from tensorflow.python.ops import control_flow_util

from tensorflow_customops.python.ops import export_util
from tensorflow_customops.python.ops.check_condition_ops import check_condition
from tensorflow_customops.python.ops.roi_box_counts_ops import checked_box_counts

_BOX_FORMATS = (
    "[K, 5] rows (batch_index, x1, y1, x2, y2), [N, K, 4] per-image boxes, a "
    "RaggedTensor [N, None, 4], or a list of per-image [L_i, 4] boxes"
)
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


def in_xla_context():
    """Whether the graph being built is to be compiled by XLA (jit_compile)."""
    return control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph()
    )


def flat_rois(rois, box_counts, features, spatial_scale):
    """The `[M, 5]` rows the ops take, and a function from the ops' `[M, ...]`
    result back to the layout of `rois`; `spatial_scale` is the smallest the
    rows are pooled at. Under XLA, padding boxes (past `box_counts`) are rows
    too, off the map, as in eager mode, so that `M` is `N * K` and the result
    a reshape: XLA's ScatterNd needs its shape when it compiles, which a
    dynamic N is not, and DynamicStitch (multi_scale_roi_align) its
    indices."""
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


def checked_row_width(flat):
    """`[M, 5]` rows from `flat_rois`, checked when the graph runs where their
    width is unknown now: for reading their columns before an op checks
    them."""
    if flat.shape[1] is not None:
        return flat
    (flat,) = check_condition(
        tf.equal(tf.shape(flat)[1], 5),
        [flat],
        f"rois must have shape [K, 5] or [N, K, 4] ({_BOX_FORMATS})",
    )
    return flat


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
    """`flat_rois` for the tensors of `box_tensors`; the result is ragged."""
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


def padding_box(dtype, spatial_scale):
    """The box that padding rows get: 4 pixels before the map's corner at
    `spatial_scale`, where a box's samples are all dropped and its bins empty,
    so every op pools it to zeros; None where `dtype` cannot hold it (a
    `spatial_scale` below about 2^-126 in float32)."""
    with np.errstate(over="ignore"):
        box = np.full(4, -4.0 / spatial_scale, dtype.as_numpy_dtype)
    return box if np.isfinite(box).all() else None


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

    off_map = padding_box(rois.dtype, spatial_scale) if in_xla_context() else None
    if box_counts is None or off_map is not None:
        if box_counts is not None:
            # One count per image by shape too (the op has checked it when
            # this runs), so that a wrong count of counts is the op's error.
            box_counts = tf.gather(box_counts, tf.range(num_images))
            real = tf.sequence_mask(box_counts, boxes_per_image, tf.bool)
            rois = tf.where(real[..., tf.newaxis], rois, off_map)
        # Not tf.repeat: its ONNX form reshapes to [N * K], which ONNX reads
        # as "keep the input's size" where K is 0.
        index = tf.reshape(
            tf.broadcast_to(
                tf.range(num_images)[:, tf.newaxis], [num_images, boxes_per_image]
            ),
            [-1],
        )
        with tf.control_dependencies(checks):
            flat = tf.concat(
                [tf.cast(index, rois.dtype)[:, tf.newaxis], tf.reshape(rois, [-1, 4])],
                1,
            )
        # K may be 0.
        return flat, lambda out: tf.reshape(
            out, result_shape(out), name=export_util.LITERAL_ZEROS_RESHAPE
        )

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
    as `padding_box`, so the result is a reshape of the rows' with no
    copy."""
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
    box = padding_box(boxes.dtype, spatial_scale)
    if box is not None:
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
