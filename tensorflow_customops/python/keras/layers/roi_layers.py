"""Keras layers over the RoI ops: RoIPool, RoIAlign, PSRoIPool, PSRoIAlign,
MultiScaleRoIAlign.

They subclass the installed `keras`: Keras 3 from TensorFlow 2.16, Keras 2
(the one `tf.keras` is) on TensorFlow 2.12 to 2.15, so they go into models of
either. Only APIs both Keras versions have are used, except where noted.

Each layer is called as `layer(features, boxes)` or `layer(features, boxes,
box_counts)`, or on a list, `layer([features, boxes])` or `layer([features,
boxes, box_counts])`; MultiScaleRoIAlign takes the list of feature maps, finest
first, in place of `features`. The boxes take the forms the functions take
(see `tfco.roi_align`), with the result in the same layout. For a Keras model,
give boxes per image, `[N, K, 4]` (padded, with `box_counts`) or a
`tf.RaggedTensor` `[N, None, 4]`: Keras slices and shuffles them together with
their images, and the result is per image, `[N, K, h, w, C]`. `[K, 5]` rows
`(batch_index, x1, y1, x2, y2)` give `[K, h, w, C]` in direct calls on tensors;
a layer called on `[K, 5]` Keras inputs refuses them, since their batch indices
go stale when Keras slices or shuffles the images.

The layers need Keras' TensorFlow backend (`KERAS_BACKEND=tensorflow`, the
default); under another backend they refuse to be built.

Boxes are never autocast: under a mixed precision policy the features are cast
to the compute dtype and the box coordinates stay float32. Under a float64
policy, float64 boxes stay float64 (the ops' rule, `roi_align`'s `rois`).

The layers are registered as `tfco>RoIAlign` and so on: a saved model that
uses them reloads once `tensorflow_customops` has been imported.
"""

import numbers

import keras
import tensorflow as tf

from tensorflow_customops.python.ops import (
    export_util,
    load_library,
    roi_boxes,
    roi_checks,
    roi_ops,
)

_KERAS_DATA_FORMATS = {"NHWC": "channels_last", "NCHW": "channels_first"}


def _is_shape(value):
    return isinstance(value, (list, tuple)) and all(
        d is None or isinstance(d, numbers.Integral) for d in value
    )


def _rank(shape):
    # Keras 2's symbolic shapes are TensorShapes, Keras 3's tuples.
    return shape.rank if isinstance(shape, tf.TensorShape) else len(shape)


def _is_keras_tensor(value):
    try:
        return keras.backend.is_keras_tensor(value)
    except ValueError:  # Keras 2's answer for anything but a tensor
        return False


def _counts_tensor(box_counts):
    # Keras 3 takes no Python list as a positional call argument.
    if not isinstance(box_counts, (list, tuple)):
        return box_counts
    try:
        return tf.convert_to_tensor(box_counts)
    except (TypeError, ValueError) as error:
        raise ValueError(f"box_counts must be an int [N] tensor: {error}") from None


class _RoILayer(keras.layers.Layer):
    """What the layers share: inputs, shapes, dtypes, names and config."""

    # The function the layer applies, its default layer name, and whether it
    # divides the channels into output_size groups.
    _op = None
    _default_name = None
    _position_sensitive = False
    _multi_scale = False

    def __init__(self, output_size, data_format=None, **kwargs):
        backend = keras.backend.backend()
        if backend != "tensorflow":
            raise RuntimeError(
                f"{type(self).__name__} runs TensorFlow ops, but Keras runs on "
                f"the {backend!r} backend: set KERAS_BACKEND=tensorflow before "
                "importing keras"
            )
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
        self.output_size = roi_checks.check_size(output_size)
        self.data_format = roi_checks.check_data_format(
            keras.backend.image_data_format() if data_format is None else data_format
        )

    def _op_kwargs(self):
        return {"output_size": self.output_size, "data_format": self.data_format}

    def _split(self, inputs, boxes=None, box_counts=None):
        """(features, boxes, box_counts) from either call form, on tensors or
        on shapes."""
        if boxes is not None:
            return inputs, boxes, box_counts
        if box_counts is not None and isinstance(inputs, (list, tuple)):
            raise ValueError(
                f"{type(self).__name__} got box_counts as an argument and the "
                "boxes in a list: give both in the list, layer([features, boxes, "
                "box_counts]), or both as arguments, layer(features, boxes, "
                "box_counts=box_counts)"
            )
        if (
            box_counts is not None
            or not isinstance(inputs, (list, tuple))
            or len(inputs) not in (2, 3)
        ):
            what = "[features per level]" if self._multi_scale else "features"
            got = type(inputs).__name__
            if isinstance(inputs, (list, tuple)):
                got += f" of length {len(inputs)}"
            raise ValueError(
                f"{type(self).__name__} takes {what}, boxes and optionally "
                f"box_counts: layer({what}, boxes, box_counts=None) or "
                f"layer([{what}, boxes]) or layer([{what}, boxes, box_counts]); "
                f"got no boxes, and {got} inputs"
            )
        return (*inputs, None) if len(inputs) == 2 else tuple(inputs)

    def __call__(self, inputs, boxes=None, box_counts=None, **kwargs):
        if box_counts is not None:
            kwargs["box_counts"] = _counts_tensor(box_counts)
        if boxes is not None:
            return super().__call__(inputs, self._checked_boxes(boxes), **kwargs)
        if isinstance(inputs, (list, tuple)) and len(inputs) in (2, 3):
            features, boxes, *counts = inputs
            inputs = [
                features,
                self._checked_boxes(boxes),
                *map(_counts_tensor, counts),
            ]
        return super().__call__(inputs, **kwargs)

    def _checked_boxes(self, boxes):
        """`boxes` as Keras takes them: Keras 3 refuses nested Python lists
        of numbers, and lists that mix them with tensors, as call arguments."""
        if isinstance(boxes, (list, tuple)):
            return roi_boxes.box_tensors(boxes)
        # fit and predict slice [K, 5] rows apart from the images their first
        # column indexes, so a model must not take them as an input.
        if _is_keras_tensor(boxes) and _rank(boxes.shape) == 2:
            raise ValueError(
                f"{type(self).__name__} got boxes of shape {tuple(boxes.shape)} "
                "from a Keras input: [K, 5] rows (batch_index, x1, y1, x2, y2) "
                "cannot go into a Keras model, since fit and predict slice and "
                "shuffle them apart from the images their batch indices name. Give "
                "boxes per image: [N, K, 4] with box_counts (keras.Input((None, "
                "4)) and keras.Input((), dtype='int32')), or ragged [N, None, 4] "
                "(keras.Input((None, 4), ragged=True)). [K, 5] rows work in direct "
                "calls on tensors."
            )
        return boxes

    def compute_output_shape(
        self, input_shape, boxes_shape=None, box_counts_shape=None
    ):
        features_shape, boxes_shape, counts_shape = self._split(
            input_shape, boxes_shape, box_counts_shape
        )
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

    def compute_output_spec(self, inputs, boxes=None, box_counts=None):
        # Keras 3's symbolic call; Keras 2 traces `call` on its own symbolic
        # tensors instead and never calls this.
        parts = self._split(inputs, boxes, box_counts)
        shapes = [
            [f.shape for f in x] if isinstance(x, (list, tuple)) else x.shape
            for x in parts
            if x is not None
        ]
        spec = keras.KerasTensor(
            self.compute_output_shape(shapes),
            dtype=self.compute_dtype,
            ragged=getattr(parts[1], "ragged", False),
        )
        # Then the function's own checks (dtypes, box_counts, the pyramid's
        # scales and channels), run by tracing it on the inputs' static shapes
        # and dtypes: when the model is built, not at a later trace with
        # relaxed shapes (a second image size in predict) or at export.
        specs = [
            None if x is None else tf.nest.map_structure(export_util.type_spec, x)
            for x in parts
        ]
        tf.function(self.call, autograph=False).get_concrete_function(*specs)
        return spec

    def _cast_dtype(self, dtype):
        dtype = tf.as_dtype(dtype)
        return tf.as_dtype(self.compute_dtype) if dtype.is_floating else dtype

    def _cast_features(self, features):
        return tf.cast(features, self._cast_dtype(features.dtype))

    def call(self, inputs, boxes=None, box_counts=None):
        features, boxes, box_counts = self._split(inputs, boxes, box_counts)
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
        self.spatial_scale = roi_checks.check_spatial_scale(spatial_scale)

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
        self.sampling_ratio = roi_checks.check_sampling_ratio(sampling_ratio)
        self.aligned = roi_checks.check_aligned(
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
{call}"""
_CALL_DOC = """
    Call arguments, also taken as one list `[features, boxes(, box_counts)]`:
      {features}
      boxes: Boxes in any form `tfco.roi_align` takes; in a Keras model
        `[N, K, 4]` or ragged `[N, None, 4]`, never `[K, 5]` rows.
      box_counts: With `[N, K, 4]` boxes, an int `[N]` tensor: the real boxes
        of each image (optional).
"""
_FEATURES_DOC = "features: `[N, H, W, C]` (or NCHW) features."
_PS_DOC = "; the features' channels must be\n        divisible by `height * width`"
_SAMPLING_DOC = """
      sampling_ratio: Sampling points per bin along each axis, an int at most
        64; `<= 0` is adaptive.
      aligned: Shift boxes by half a pixel (default {aligned})."""


def _layer_doc(summary, ps=False, aligned=None):
    sampling = "" if aligned is None else _SAMPLING_DOC.format(aligned=aligned)
    return summary + _ARGS_DOC.format(
        ps=_PS_DOC if ps else "",
        sampling=sampling,
        call=_CALL_DOC.format(features=_FEATURES_DOC),
    )


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

    Each box is pooled from the level its size selects.

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

    __doc__ = __doc__.rstrip(" ") + _CALL_DOC.format(
        features="features: A list of feature maps, one per pyramid level, "
        "finest first."
    )
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
            else roi_checks.check_spatial_scales(spatial_scales)
        )
        self.image_size = (
            None
            if image_size is None
            else list(roi_checks.check_size(image_size, "image_size"))
        )
        self.sampling_ratio = roi_checks.check_sampling_ratio(sampling_ratio)
        self.aligned = roi_checks.check_aligned(aligned)
        self.canonical_scale, self.canonical_level = roi_checks.check_level_mapping(
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
