"""Keras layers over the RoI ops: RoIPool, RoIAlign, PSRoIPool, PSRoIAlign,
MultiScaleRoIAlign.

They subclass the installed `keras`: Keras 3 from TensorFlow 2.16, Keras 2
(the one `tf.keras` is) on TensorFlow 2.12 to 2.15, so they go into models of
either. Only APIs both Keras versions have are used, except where noted.

Each layer is called on `[features, boxes]` or `[features, boxes, box_counts]`
(MultiScaleRoIAlign on `[[features per level], boxes, ...]`). For training
with `fit`, give boxes per image, `[N, K, 4]` (padded, with `box_counts`) or
a `tf.RaggedTensor` `[N, None, 4]`: Keras slices and shuffles them together
with their images, and the result is per image, `[N, K, h, w, C]`. `[K, 5]`
rows `(batch_index, x1, y1, x2, y2)` give `[K, h, w, C]`; their batch indices
go stale when Keras slices or shuffles the images, so use them only in direct
calls.

Boxes are never autocast: under a mixed precision policy the features are cast
to the compute dtype and the box coordinates stay float32.

The layers are registered as `tfco>RoIAlign` and so on: a saved model that
uses them reloads once `tensorflow_customops` has been imported.
"""

import numbers

import keras
import tensorflow as tf

from tensorflow_customops.python.ops import load_library, roi_ops

_KERAS_DATA_FORMATS = {"NHWC": "channels_last", "NCHW": "channels_first"}


def _is_shape(value):
    return isinstance(value, (list, tuple)) and all(
        d is None or isinstance(d, numbers.Integral) for d in value
    )


class _RoILayer(keras.layers.Layer):
    """What the layers share: inputs, shapes, dtypes, names and config."""

    # The function the layer applies, its default layer name, and whether it
    # divides the channels into output_size groups.
    _op = None
    _default_name = None
    _position_sensitive = False
    _multi_scale = False

    def __init__(self, output_size, data_format=None, **kwargs):
        if not kwargs.get("name"):
            # Keras would derive "ro_i_align" from the class name.
            uid = keras.backend.get_uid(self._default_name)
            kwargs["name"] = self._default_name + (f"_{uid - 1}" if uid > 1 else "")
        # The layer casts the features itself: Keras' autocast would also
        # round the box coordinates to the compute dtype.
        kwargs["autocast"] = False
        super().__init__(**kwargs)
        # Without the XLA lowerings, this keeps compile(jit_compile="auto")
        # off XLA instead of failing to compile.
        self.supports_jit = load_library.xla_status()[0]
        self.output_size = roi_ops.check_size(output_size)
        self.data_format = roi_ops.check_data_format(
            keras.backend.image_data_format() if data_format is None else data_format
        )

    def _op_kwargs(self):
        return {"output_size": self.output_size, "data_format": self.data_format}

    def _split(self, inputs):
        """(features, boxes, box_counts) from the call's inputs or shapes."""
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (2, 3):
            what = "[features per level]" if self._multi_scale else "features"
            raise ValueError(
                f"{type(self).__name__} takes [{what}, boxes] or [{what}, boxes, "
                f"box_counts], got {inputs!r}"
            )
        return (*inputs, None) if len(inputs) == 2 else tuple(inputs)

    def build(self, input_shape):
        # Fails early on shapes the op would reject at run time.
        self.compute_output_shape(input_shape)

    def compute_output_shape(self, input_shape):
        features_shape, boxes_shape, counts_shape = self._split(input_shape)
        if self._multi_scale:
            if not isinstance(features_shape, (list, tuple)) or _is_shape(
                features_shape
            ):
                raise ValueError(
                    f"{type(self).__name__} takes a list of feature maps, got "
                    f"shape {features_shape}"
                )
            features_shape = features_shape[0]
        features_shape, boxes_shape = tuple(features_shape), tuple(boxes_shape)
        if len(features_shape) != 4:
            raise ValueError(
                f"features must have rank 4 ({self.data_format}), got shape "
                f"{features_shape}"
            )
        if len(boxes_shape) == 3 and boxes_shape[2] in (None, 4):
            leading = boxes_shape[:2]
        elif len(boxes_shape) == 2 and boxes_shape[1] in (None, 5):
            leading = boxes_shape[:1]
        else:
            raise ValueError(
                f"boxes must have shape [N, K, 4] or [K, 5], got {boxes_shape}"
            )
        if counts_shape is not None and len(leading) != 2:
            raise ValueError("box_counts needs boxes of shape [N, K, 4]")
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
            return (*leading, height, width, channels)
        return (*leading, channels, height, width)

    def compute_output_spec(self, inputs):
        # Keras 3's symbolic call; Keras 2 traces `call` on its own symbolic
        # tensors instead and never calls this.
        parts = self._split(inputs)
        shapes = [
            [f.shape for f in x] if isinstance(x, (list, tuple)) else x.shape
            for x in parts
            if x is not None
        ]
        return keras.KerasTensor(
            self.compute_output_shape(shapes),
            dtype=self.compute_dtype,
            ragged=getattr(parts[1], "ragged", False),
        )

    def _cast_features(self, features):
        if features.dtype.is_floating:
            return tf.cast(features, self.compute_dtype)
        return features

    def call(self, inputs):
        features, boxes, box_counts = self._split(inputs)
        if self._multi_scale:
            features = [self._cast_features(f) for f in features]
        else:
            features = self._cast_features(features)
        return type(self)._op(
            features, boxes, box_counts=box_counts, **self._op_kwargs()
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            self._op_kwargs(),
            output_size=list(self.output_size),
            data_format=_KERAS_DATA_FORMATS[self.data_format],
        )
        return config


class _SingleScaleLayer(_RoILayer):
    def __init__(self, output_size, spatial_scale=1.0, data_format=None, **kwargs):
        super().__init__(output_size, data_format, **kwargs)
        self.spatial_scale = roi_ops.check_spatial_scale(spatial_scale)

    def _op_kwargs(self):
        return {**super()._op_kwargs(), "spatial_scale": self.spatial_scale}


class _SamplingLayer(_SingleScaleLayer):
    _default_aligned = None

    def __init__(
        self,
        output_size,
        spatial_scale=1.0,
        sampling_ratio=-1,
        aligned=None,
        data_format=None,
        **kwargs,
    ):
        super().__init__(output_size, spatial_scale, data_format, **kwargs)
        self.sampling_ratio = roi_ops.check_sampling_ratio(sampling_ratio)
        self.aligned = roi_ops.check_aligned(
            self._default_aligned if aligned is None else aligned
        )

    def _op_kwargs(self):
        return {
            **super()._op_kwargs(),
            "sampling_ratio": self.sampling_ratio,
            "aligned": self.aligned,
        }


_ARGS_DOC = """
    Args:
      output_size: `int` or `(height, width)` of the output bins{ps}.
      spatial_scale: Factor from box coordinates to feature-map coordinates.{sampling}
      data_format: `"channels_last"` (NHWC) or `"channels_first"` (NCHW), for
        both features and the output; TensorFlow's `"NHWC"`/`"NCHW"` work too.
        Defaults to `keras.backend.image_data_format()`.
      **kwargs: Keras layer arguments (`name`, `dtype`, ...).
"""
_PS_DOC = "; the features' channels must be\n        divisible by `height * width`"
_SAMPLING_DOC = """
      sampling_ratio: Sampling points per bin along each axis, an int at most
        64; `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel (default {aligned})."""


def _layer_doc(summary, ps=False, aligned=None):
    sampling = "" if aligned is None else _SAMPLING_DOC.format(aligned=aligned)
    return summary + _ARGS_DOC.format(ps=_PS_DOC if ps else "", sampling=sampling)


@keras.utils.register_keras_serializable(package="tfco")
class RoIPool(_SingleScaleLayer):
    __doc__ = _layer_doc("RoI max pooling, as `tfco.roi_pool`.\n")
    _op = staticmethod(roi_ops.roi_pool)
    _default_name = "roi_pool"


@keras.utils.register_keras_serializable(package="tfco")
class PSRoIPool(_SingleScaleLayer):
    __doc__ = _layer_doc(
        "Position-sensitive RoI average pooling, as `tfco.ps_roi_pool`.\n", ps=True
    )
    _op = staticmethod(roi_ops.ps_roi_pool)
    _default_name = "ps_roi_pool"
    _position_sensitive = True


@keras.utils.register_keras_serializable(package="tfco")
class RoIAlign(_SamplingLayer):
    __doc__ = _layer_doc(
        "RoI Align, as `tfco.roi_align`.\n", aligned="False; use True for new models"
    )
    _op = staticmethod(roi_ops.roi_align)
    _default_name = "roi_align"
    _default_aligned = False


@keras.utils.register_keras_serializable(package="tfco")
class PSRoIAlign(_SamplingLayer):
    __doc__ = _layer_doc(
        "Position-sensitive RoI Align, as `tfco.ps_roi_align`.\n",
        ps=True,
        aligned="True, as torchvision",
    )
    _op = staticmethod(roi_ops.ps_roi_align)
    _default_name = "ps_roi_align"
    _position_sensitive = True
    _default_aligned = True


@keras.utils.register_keras_serializable(package="tfco")
class MultiScaleRoIAlign(_RoILayer):
    """RoI Align over a feature pyramid, as `tfco.multi_scale_roi_align`.

    Called on `[[features per level, finest first], boxes]` (and optionally
    `box_counts`); each box is pooled from the level its size selects.

    Args:
      output_size: `int` or `(height, width)` of the output bins.
      spatial_scales: Scale of each level, powers of two halving from level to
        level; `None` infers them from `image_size` and the feature maps'
        static heights.
      image_size: `(height, width)` of the input images, to infer
        `spatial_scales`.
      sampling_ratio: Sampling points per bin along each axis, an int at most
        64; `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel (default False, as torchvision).
      canonical_scale: Box size that maps to `canonical_level`, a positive
        int (224).
      canonical_level: Pyramid level of such a box, an int (4).
      data_format: As for `RoIAlign`.
      **kwargs: Keras layer arguments (`name`, `dtype`, ...).
    """

    _op = staticmethod(roi_ops.multi_scale_roi_align)
    _default_name = "multi_scale_roi_align"
    _multi_scale = True

    def __init__(
        self,
        output_size,
        spatial_scales=None,
        image_size=None,
        sampling_ratio=-1,
        aligned=False,
        canonical_scale=224,
        canonical_level=4,
        data_format=None,
        **kwargs,
    ):
        super().__init__(output_size, data_format, **kwargs)
        if spatial_scales is None and image_size is None:
            raise ValueError(
                "MultiScaleRoIAlign needs spatial_scales, or image_size to infer them"
            )
        self.spatial_scales = (
            None
            if spatial_scales is None
            else roi_ops.check_spatial_scales(spatial_scales)
        )
        self.image_size = (
            None
            if image_size is None
            else list(roi_ops.check_size(image_size, "image_size"))
        )
        self.sampling_ratio = roi_ops.check_sampling_ratio(sampling_ratio)
        self.aligned = roi_ops.check_aligned(aligned)
        self.canonical_scale, self.canonical_level = roi_ops.check_level_mapping(
            canonical_scale, canonical_level
        )

    def _op_kwargs(self):
        return {
            **super()._op_kwargs(),
            "spatial_scales": self.spatial_scales,
            "image_size": self.image_size,
            "sampling_ratio": self.sampling_ratio,
            "aligned": self.aligned,
            "canonical_scale": self.canonical_scale,
            "canonical_level": self.canonical_level,
        }
