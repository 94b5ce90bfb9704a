"""Keras 3 layers over the RoI ops: RoIPool, RoIAlign, PSRoIPool, PSRoIAlign.

Each layer is called on `[features, rois]`: `features` is `[N, H, W, C]` (or
`[N, C, H, W]` with `data_format="NCHW"`) and `rois` is `[K, 5]` rows
`(batch_index, x1, y1, x2, y2)`. K is independent of N, so in a functional
model `features` and `rois` are separate `keras.Input`s whose leading
dimensions need not match; call such a model directly (`model([x, rois])`)
rather than through `fit`/`predict`, which slice every input along axis 0.

The layers are registered as `tfco>RoIAlign` and so on: a saved model that
uses them reloads once `tensorflow_customops` has been imported.
"""

import math
import numbers

import keras

from tensorflow_customops.python.ops import roi_ops

# The kernels' limit (kMaxSamplingRatio in core/kernels/roi_ops_common.h).
_MAX_SAMPLING_RATIO = 64
_DATA_FORMATS = ("NHWC", "NCHW")


def _check_output_size(output_size):
    # roi_ops checks ints and pairs; anything else (a float) is not iterable.
    if not isinstance(output_size, (numbers.Integral, list, tuple)):
        raise ValueError(
            f"output_size must be an int or a pair of ints, got {output_size!r}"
        )
    return roi_ops._output_size(output_size)


def _check_spatial_scale(spatial_scale):
    if (
        isinstance(spatial_scale, bool)
        or not isinstance(spatial_scale, numbers.Real)
        or not math.isfinite(spatial_scale)
        or spatial_scale <= 0
    ):
        raise ValueError(
            f"spatial_scale must be a finite positive number, got {spatial_scale!r}"
        )
    return float(spatial_scale)


def _check_aligned(aligned):
    if not isinstance(aligned, bool):
        raise ValueError(f"aligned must be a bool, got {aligned!r}")
    return aligned


def _check_sampling_ratio(sampling_ratio):
    if isinstance(sampling_ratio, bool) or not isinstance(
        sampling_ratio, numbers.Integral
    ):
        raise ValueError(f"sampling_ratio must be an int, got {sampling_ratio!r}")
    if sampling_ratio > _MAX_SAMPLING_RATIO:
        raise ValueError(
            f"sampling_ratio must be at most {_MAX_SAMPLING_RATIO} (or <= 0 for "
            f"an adaptive grid), got {sampling_ratio!r}"
        )
    return int(sampling_ratio)


def _check_data_format(data_format):
    if data_format not in _DATA_FORMATS:
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    return data_format


class _RoILayer(keras.layers.Layer):
    """What the four layers share: arguments, shapes and config."""

    # The op the layer applies, and whether it is position-sensitive (divides
    # the channels into output_size groups).
    _op = None
    _position_sensitive = False

    def __init__(self, output_size, spatial_scale=1.0, data_format="NHWC", **kwargs):
        super().__init__(**kwargs)
        self.output_size = _check_output_size(output_size)
        self.spatial_scale = _check_spatial_scale(spatial_scale)
        self.data_format = _check_data_format(data_format)

    def _op_kwargs(self):
        return {
            "output_size": self.output_size,
            "spatial_scale": self.spatial_scale,
            "data_format": self.data_format,
        }

    def _split_shapes(self, input_shape):
        if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2:
            raise ValueError(
                f"{type(self).__name__} takes [features, rois], got input shape "
                f"{input_shape!r}"
            )
        features_shape, rois_shape = (tuple(s) for s in input_shape)
        if len(features_shape) != 4:
            raise ValueError(
                f"features must have rank 4 ({self.data_format}), got shape "
                f"{features_shape}"
            )
        if len(rois_shape) != 2 or rois_shape[1] not in (None, 5):
            raise ValueError(f"rois must have shape [K, 5], got {rois_shape}")
        return features_shape, rois_shape

    def build(self, input_shape):
        # Fails early on shapes the op would reject at run time.
        self.compute_output_shape(input_shape)

    def compute_output_shape(self, input_shape):
        features_shape, rois_shape = self._split_shapes(input_shape)
        channels = features_shape[3 if self.data_format == "NHWC" else 1]
        height, width = self.output_size
        if self._position_sensitive and channels is not None:
            if channels % (height * width):
                raise ValueError(
                    f"features channels ({channels}) must be divisible by "
                    f"output_size height * width ({height * width})"
                )
            channels //= height * width
        if self.data_format == "NHWC":
            return (rois_shape[0], height, width, channels)
        return (rois_shape[0], channels, height, width)

    def call(self, inputs):
        features, rois = inputs
        return type(self)._op(features, rois, **self._op_kwargs())

    def get_config(self):
        config = super().get_config()
        config.update(self._op_kwargs(), output_size=list(self.output_size))
        return config


@keras.saving.register_keras_serializable(package="tfco")
class RoIPool(_RoILayer):
    """RoI max pooling, as `tfco.roi_pool`: `[features, rois]` to `[K, ...]`.

    Args:
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      **kwargs: Keras layer arguments (`name`, `dtype`, ...).
    """

    _op = staticmethod(roi_ops.roi_pool)


@keras.saving.register_keras_serializable(package="tfco")
class PSRoIPool(_RoILayer):
    """Position-sensitive RoI average pooling, as `tfco.ps_roi_pool`.

    Args:
      output_size: `int` or `(height, width)`; the features' channels must be
        divisible by `height * width`.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      **kwargs: Keras layer arguments (`name`, `dtype`, ...).
    """

    _op = staticmethod(roi_ops.ps_roi_pool)
    _position_sensitive = True


@keras.saving.register_keras_serializable(package="tfco")
class RoIAlign(_RoILayer):
    """RoI Align, as `tfco.roi_align`: `[features, rois]` to `[K, ...]`.

    Args:
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      sampling_ratio: Sampling points per bin along each axis, at most 64;
        `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel (use True for new models).
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      **kwargs: Keras layer arguments (`name`, `dtype`, ...).
    """

    _op = staticmethod(roi_ops.roi_align)

    def __init__(
        self,
        output_size,
        spatial_scale=1.0,
        sampling_ratio=-1,
        aligned=False,
        data_format="NHWC",
        **kwargs,
    ):
        super().__init__(output_size, spatial_scale, data_format, **kwargs)
        self.sampling_ratio = _check_sampling_ratio(sampling_ratio)
        self.aligned = _check_aligned(aligned)

    def _op_kwargs(self):
        return {
            **super()._op_kwargs(),
            "sampling_ratio": self.sampling_ratio,
            "aligned": self.aligned,
        }


@keras.saving.register_keras_serializable(package="tfco")
class PSRoIAlign(_RoILayer):
    """Position-sensitive RoI Align, as `tfco.ps_roi_align`.

    Args:
      output_size: `int` or `(height, width)`; the features' channels must be
        divisible by `height * width`.
      spatial_scale: Factor from box coordinates to feature-map coordinates.
      sampling_ratio: Sampling points per bin along each axis, at most 64;
        `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel (the default, as torchvision).
      data_format: `"NHWC"` or `"NCHW"`, for both features and the output.
      **kwargs: Keras layer arguments (`name`, `dtype`, ...).
    """

    _op = staticmethod(roi_ops.ps_roi_align)
    _position_sensitive = True

    def __init__(
        self,
        output_size,
        spatial_scale=1.0,
        sampling_ratio=-1,
        aligned=True,
        data_format="NHWC",
        **kwargs,
    ):
        super().__init__(output_size, spatial_scale, data_format, **kwargs)
        self.sampling_ratio = _check_sampling_ratio(sampling_ratio)
        self.aligned = _check_aligned(aligned)

    def _op_kwargs(self):
        return {
            **super()._op_kwargs(),
            "sampling_ratio": self.sampling_ratio,
            "aligned": self.aligned,
        }
