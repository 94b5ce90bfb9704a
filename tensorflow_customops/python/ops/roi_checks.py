"""Argument checks of the RoI functions and layers (and of DeformableConv2d's
sizes and data format): each returns the value the op takes, or raises naming
the argument."""

import math
import numbers

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops.op_specs import allowed_dtypes, dtype_names

# The ops' limit (kMaxSamplingRatio in core/kernels/roi/roi_shape.h), checked
# here too so that the layers refuse it when built, before any tracing
# (roi_validation_test checks that the two agree).
_MAX_SAMPLING_RATIO = 64
_FEATURE_DTYPES = allowed_dtypes("CustomOps>RoiAlign")
# Keras' names map onto TensorFlow's.
_DATA_FORMATS = {
    "NHWC": "NHWC",
    "NCHW": "NCHW",
    "channels_last": "NHWC",
    "channels_first": "NCHW",
}


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
    if max(pair) >= 2**31:
        raise ValueError(f"{name} must be below 2**31, got {size!r}")
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
    """A finite positive float, also in float32 (the op's attribute type), and
    a normal one there: the kernels run with subnormals flushed to zero."""
    if isinstance(spatial_scale, bool) or not isinstance(spatial_scale, numbers.Real):
        raise TypeError(f"spatial_scale must be a number, got {spatial_scale!r}")
    with np.errstate(over="ignore"):
        as_float32 = np.float32(spatial_scale)
    if not np.finfo(np.float32).tiny <= as_float32 < np.inf:
        raise ValueError(
            "spatial_scale must be a finite positive number (in float32), at "
            f"least 2**-126 (float32's smallest normal number), got {spatial_scale!r}"
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


def check_features(features):
    features = tf.convert_to_tensor(features)
    if features.dtype not in _FEATURE_DTYPES:
        raise TypeError(
            f"features must be {dtype_names(_FEATURE_DTYPES)}, got "
            f"{features.dtype.name}; cast them first"
        )
    if features.shape.rank not in (None, 4):
        raise ValueError(
            f"features must have rank 4 (NHWC or NCHW), got shape {features.shape}"
        )
    return features
