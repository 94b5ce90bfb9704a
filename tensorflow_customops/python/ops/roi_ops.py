"""RoI pooling for detection: roi_pool, roi_align, ps_roi_pool, ps_roi_align.

The arguments mirror torchvision.ops, with TensorFlow's NHWC as the default
layout. Boxes are float `[K, 5]` rows `(batch_index, x1, y1, x2, y2)` in
input-image coordinates, or a list of per-image `[L_i, 4]` boxes.
"""

import numbers

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()

_POOL_ATTRS = ("pooled_height", "pooled_width", "spatial_scale", "data_format")
_ALIGN_ATTRS = (*_POOL_ATTRS, "sampling_ratio", "aligned")
_PS_ALIGN_ATTRS = _ALIGN_ATTRS


def _output_size(output_size):
    """(pooled_height, pooled_width) from an int or a pair of ints."""
    if isinstance(output_size, numbers.Integral):
        size = (int(output_size), int(output_size))
    else:
        size = tuple(output_size)
        if len(size) != 2 or not all(isinstance(s, numbers.Integral) for s in size):
            raise ValueError(
                f"output_size must be an int or a pair of ints, got {output_size!r}"
            )
        size = (int(size[0]), int(size[1]))
    if min(size) <= 0:
        raise ValueError(f"output_size must be positive, got {output_size!r}")
    return size


def _is_box_list(rois):
    return (
        isinstance(rois, (list, tuple))
        and len(rois) > 0
        and all(isinstance(b, (tf.Tensor, np.ndarray)) for b in rois)
    )


def convert_rois(rois):
    """Boxes as a float32 `[K, 5]` tensor of `(batch_index, x1, y1, x2, y2)`.

    Args:
      rois: A `[K, 5]` tensor (or anything convertible), or a list of per-image
        `[L_i, 4]` tensors or arrays of `(x1, y1, x2, y2)` whose list position
        is the batch index.

    Returns:
      A float32 `Tensor` of shape `[K, 5]`.
    """
    if _is_box_list(rois):
        rows = []
        for index, boxes in enumerate(rois):
            boxes = tf.cast(tf.convert_to_tensor(boxes), tf.float32)
            boxes = tf.ensure_shape(boxes, [None, 4])
            batch_index = tf.fill([tf.shape(boxes)[0], 1], float(index))
            rows.append(tf.concat([batch_index, boxes], axis=1))
        return tf.concat(rows, axis=0)
    rois = tf.convert_to_tensor(rois)
    return rois if rois.dtype == tf.float32 else tf.cast(rois, tf.float32)


def roi_pool(
    features, rois, output_size, spatial_scale=1.0, data_format="NHWC", name=None
):
    """RoI max pooling (Fast R-CNN), as `torchvision.ops.roi_pool`.

    Each box, rounded to whole feature-map pixels, is split into
    `output_size` bins, and each bin takes its maximum (0 for an empty bin).

    Args:
      features: `[N, H, W, C]` (or `[N, C, H, W]` with `data_format="NCHW"`)
        tensor of type half, bfloat16, float32 or float64.
      rois: Boxes: `[K, 5]` rows `(batch_index, x1, y1, x2, y2)`, or a list of
        per-image `[L_i, 4]` boxes (see `convert_rois`).
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates,
        e.g. 1/16 for a stride-16 feature map.
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C]` (or `[K, C, height, width]`) tensor.

    Example:

    >>> features = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
    >>> tfco.roi_pool(features, [[0, 0, 0, 3, 3]], output_size=2)[0, :, :, 0]
    <tf.Tensor: shape=(2, 2), dtype=float32, numpy=
    array([[ 5.,  7.],
           [13., 15.]], dtype=float32)>
    """
    pooled_height, pooled_width = _output_size(output_size)
    pooled, _ = _ops.custom_ops_roi_pool(
        features=features,
        rois=convert_rois(rois),
        pooled_height=pooled_height,
        pooled_width=pooled_width,
        spatial_scale=spatial_scale,
        data_format=data_format,
        name=name,
    )
    return pooled


def roi_align(
    features,
    rois,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    data_format="NHWC",
    name=None,
):
    """RoI Align (Mask R-CNN), as `torchvision.ops.roi_align`.

    Each output bin averages bilinearly interpolated samples taken on a
    regular grid inside the bin; box coordinates are not rounded.

    Args:
      features: `[N, H, W, C]` (or `[N, C, H, W]` with `data_format="NCHW"`)
        tensor of type half, bfloat16, float32 or float64.
      rois: Boxes: `[K, 5]` rows `(batch_index, x1, y1, x2, y2)`, or a list of
        per-image `[L_i, 4]` boxes (see `convert_rois`).
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      sampling_ratio: Sampling points per bin along each axis, at most 64;
        `<= 0` uses `ceil(bin size)` points (adaptive).
      aligned: If True, shift boxes by half a pixel so that pixel centres line
        up (use this for new models); False keeps Detectron's original
        behaviour.
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C]` (or `[K, C, height, width]`) tensor.

    Example:

    >>> features = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
    >>> tfco.roi_align(features, [[0, 0, 0, 2, 2]], output_size=1,
    ...                aligned=True)[0, 0, 0, 0]
    <tf.Tensor: shape=(), dtype=float32, numpy=2.5>
    """
    pooled_height, pooled_width = _output_size(output_size)
    return _ops.custom_ops_roi_align(
        features=features,
        rois=convert_rois(rois),
        pooled_height=pooled_height,
        pooled_width=pooled_width,
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        aligned=aligned,
        data_format=data_format,
        name=name,
    )


def ps_roi_pool(
    features, rois, output_size, spatial_scale=1.0, data_format="NHWC", name=None
):
    """Position-sensitive RoI average pooling (R-FCN), as
    `torchvision.ops.ps_roi_pool`.

    The input channels form `height * width` groups; output channel `c` of
    bin `(i, j)` averages input channel `(c * height + i) * width + j` over the
    bin's whole pixels.

    Args:
      features: `[N, H, W, C]` (or NCHW) tensor, `C` divisible by
        `height * width` of `output_size`.
      rois: Boxes: `[K, 5]` rows `(batch_index, x1, y1, x2, y2)`, or a list of
        per-image `[L_i, 4]` boxes.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C / (height * width)]` (or NCHW) tensor.

    Example:

    >>> features = tf.ones([1, 4, 4, 8])
    >>> tfco.ps_roi_pool(features, [[0, 0, 0, 4, 4]], output_size=2).shape
    TensorShape([1, 2, 2, 2])
    """
    pooled_height, pooled_width = _output_size(output_size)
    return _ops.custom_ops_ps_roi_pool(
        features=features,
        rois=convert_rois(rois),
        pooled_height=pooled_height,
        pooled_width=pooled_width,
        spatial_scale=spatial_scale,
        data_format=data_format,
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
    name=None,
):
    """Position-sensitive RoI Align, as `torchvision.ops.ps_roi_align`.

    `ps_roi_pool`'s channel groups with `roi_align`'s bilinear sampling.

    Args:
      features: `[N, H, W, C]` (or NCHW) tensor, `C` divisible by
        `height * width` of `output_size`.
      rois: Boxes: `[K, 5]` rows `(batch_index, x1, y1, x2, y2)`, or a list of
        per-image `[L_i, 4]` boxes.
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      sampling_ratio: Sampling points per bin along each axis, at most 64;
        `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel, as torchvision does (the
        default); False samples at the unshifted coordinates. Boxes are never
        enlarged to 1x1, unlike `roi_align(aligned=False)`.
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      name: A name for the operation (optional).

    Returns:
      `[K, height, width, C / (height * width)]` (or NCHW) tensor.

    Example:

    >>> features = tf.ones([1, 4, 4, 8])
    >>> tfco.ps_roi_align(features, [[0, 0, 0, 4, 4]], output_size=2)[0, 0, 0]
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 1.], dtype=float32)>
    """
    pooled_height, pooled_width = _output_size(output_size)
    return _ops.custom_ops_ps_roi_align(
        features=features,
        rois=convert_rois(rois),
        pooled_height=pooled_height,
        pooled_width=pooled_width,
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        aligned=aligned,
        data_format=data_format,
        name=name,
    )


def _register_feature_gradient(op_type, grad_op, attr_names):
    """Registers the Python gradient of a RoI op: d(features) from its gradient
    op, nothing for rois (nor for RoiPool's argmax output)."""

    @tf.RegisterGradient(op_type)
    def _grad(op, grad, *_):
        argmax = {"argmax": op.outputs[1]} if len(op.outputs) > 1 else {}
        grad_features = grad_op(
            grads=grad,
            rois=op.inputs[1],
            features_shape=tf.shape(op.inputs[0], out_type=tf.int32),
            **argmax,
            **{name: op.get_attr(name) for name in attr_names},
        )
        return [grad_features, None]


_register_feature_gradient(
    "CustomOps>RoiPool", _ops.custom_ops_roi_pool_grad, _POOL_ATTRS
)
_register_feature_gradient(
    "CustomOps>RoiAlign", _ops.custom_ops_roi_align_grad, _ALIGN_ATTRS
)
_register_feature_gradient(
    "CustomOps>PsRoiPool", _ops.custom_ops_ps_roi_pool_grad, _POOL_ATTRS
)
_register_feature_gradient(
    "CustomOps>PsRoiAlign", _ops.custom_ops_ps_roi_align_grad, _PS_ALIGN_ATTRS
)

for _grad_op in ("RoiPoolGrad", "RoiAlignGrad", "PsRoiPoolGrad", "PsRoiAlignGrad"):
    tf.no_gradient("CustomOps>" + _grad_op)
