"""tfco.layers RoI layers: config round trips, output shapes in both layouts
and every box form, both call forms (also in saved functional models), Keras
conventions (names, data_format, autocast, supports_jit), the refusal of `[K, 5]`
Keras inputs and of other Keras backends, constructor validation identical to
the functions', and gradients through the layers."""

import inspect
import os
from unittest import mock

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco

# Every layer with non-default values for all of its arguments.
_LAYERS = [
    (tfco.layers.RoIPool, {"output_size": (2, 3), "spatial_scale": 0.5}),
    (
        tfco.layers.RoIAlign,
        {
            "output_size": (2, 3),
            "spatial_scale": 0.5,
            "sampling_ratio": 2,
            "aligned": True,
        },
    ),
    (tfco.layers.PSRoIPool, {"output_size": (2, 3), "spatial_scale": 0.5}),
    (
        tfco.layers.PSRoIAlign,
        {"output_size": (2, 3), "spatial_scale": 0.5, "sampling_ratio": 2},
    ),
    (
        tfco.layers.MultiScaleRoIAlign,
        {
            "output_size": (2, 3),
            "spatial_scales": [0.5, 0.25],
            "sampling_ratio": 2,
            "aligned": True,
            "canonical_scale": 8,
            "canonical_level": 2,
        },
    ),
]
_KERAS_FORMATS = {"NHWC": "channels_last", "NCHW": "channels_first"}
_FUNCTIONS = {
    tfco.layers.RoIPool: tfco.roi_pool,
    tfco.layers.RoIAlign: tfco.roi_align,
    tfco.layers.PSRoIPool: tfco.ps_roi_pool,
    tfco.layers.PSRoIAlign: tfco.ps_roi_align,
    tfco.layers.MultiScaleRoIAlign: tfco.multi_scale_roi_align,
}
# (argument, bad value, error, message), for every layer and function that
# takes the argument.
_BAD_ARGUMENTS = [
    ("output_size", 0, ValueError, "output_size must be positive"),
    ("output_size", 2.5, TypeError, "output_size must be an int or a pair"),
    ("output_size", (2, 2, 2), TypeError, "output_size must be an int or a pair"),
    ("output_size", True, TypeError, "output_size must be an int or a pair"),
    ("output_size", tf.constant(2), TypeError, "output_size .* cannot be a tensor"),
    ("data_format", "NCWH", ValueError, "data_format must be 'NHWC' or"),
    ("spatial_scale", 0, ValueError, "spatial_scale must be a finite positive"),
    ("spatial_scale", -0.5, ValueError, "spatial_scale must be a finite positive"),
    ("spatial_scale", np.nan, ValueError, "spatial_scale must be a finite positive"),
    ("spatial_scale", np.inf, ValueError, "spatial_scale must be a finite positive"),
    ("spatial_scale", 1e39, ValueError, r"finite positive number \(in float32\)"),
    ("spatial_scale", "1", TypeError, "spatial_scale must be a number"),
    ("spatial_scale", True, TypeError, "spatial_scale must be a number"),
    ("sampling_ratio", 2.5, TypeError, "sampling_ratio must be an int, got 2.5"),
    ("sampling_ratio", True, TypeError, "sampling_ratio must be an int, got True"),
    ("sampling_ratio", "2", TypeError, "sampling_ratio must be an int"),
    ("sampling_ratio", 65, ValueError, "sampling_ratio must be at most 64"),
    ("sampling_ratio", -(2**40), ValueError, r"sampling_ratio must be at least -2"),
    ("aligned", 1, TypeError, "aligned must be a bool, got 1"),
    ("aligned", "True", TypeError, "aligned must be a bool"),
    ("spatial_scales", [0.3, 0.15], ValueError, "spatial_scales must be powers of"),
    ("spatial_scales", [0.5, 0.5], ValueError, "each half the one before"),
    ("spatial_scales", 0.5, TypeError, "spatial_scales must be a list of numbers"),
    ("image_size", (32, 32, 3), TypeError, "image_size must be an int or a pair"),
    ("image_size", 0, ValueError, "image_size must be positive"),
    ("canonical_scale", 0, ValueError, "canonical_scale must be positive"),
    ("canonical_scale", 224.0, TypeError, "canonical_scale must be an int"),
    ("canonical_level", 4.0, TypeError, "canonical_level must be an int"),
    ("canonical_level", True, TypeError, "canonical_level must be an int"),
]
_ROIS = np.array(
    [[0, 1.0, 1.0, 9.0, 7.0], [1, 0.0, 2.0, 5.0, 11.0], [0, 3.0, 0.0, 11.0, 11.0]],
    np.float32,
)


def _features(data_format, channels=12, size=(6, 7)):
    shape = (2, *size, channels) if data_format == "NHWC" else (2, channels, *size)
    return np.random.default_rng(0).normal(size=shape).astype(np.float32)


def _inputs(cls, data_format="NHWC", rois=_ROIS):
    """[features, rois] for a layer: a two-level pyramid for MultiScaleRoIAlign."""
    features = _features(data_format)
    if cls is tfco.layers.MultiScaleRoIAlign:
        coarse = _features(data_format, size=(3, 4))
        return [[features, coarse], rois]
    return [features, rois]


class RoiLayersTest(tf.test.TestCase, parameterized.TestCase):
    def test_exported(self):
        self.assertContainsSubset(
            ["MultiScaleRoIAlign", "PSRoIAlign", "PSRoIPool", "RoIAlign", "RoIPool"],
            tfco.layers.__all__,
        )

    def test_config_round_trip(self):
        for cls, kwargs in _LAYERS:
            for data_format in ("NHWC", "NCHW"):
                with self.subTest(layer=cls.__name__, data_format=data_format):
                    layer = cls(data_format=data_format, name="roi", **kwargs)
                    config = layer.get_config()
                    self.assertEqual(config["output_size"], [2, 3])
                    self.assertEqual(config["data_format"], _KERAS_FORMATS[data_format])
                    for key, value in kwargs.items():
                        if key != "output_size":
                            self.assertEqual(config[key], value)
                    self.assertEqual(cls.from_config(config).get_config(), config)

                    serialized = keras.saving.serialize_keras_object(layer)
                    self.assertEqual(
                        serialized["registered_name"], f"tfco>{cls.__name__}"
                    )
                    restored = keras.saving.deserialize_keras_object(serialized)
                    self.assertIsInstance(restored, cls)
                    self.assertEqual(restored.get_config(), config)

    def test_restored_layer_computes_the_same(self):
        for cls, kwargs in _LAYERS:
            with self.subTest(layer=cls.__name__):
                layer = cls(**kwargs)
                restored = keras.saving.deserialize_keras_object(
                    keras.saving.serialize_keras_object(layer)
                )
                self.assertAllEqual(layer(_inputs(cls)), restored(_inputs(cls)))

    def test_output_shapes(self):
        boxes = np.stack([_ROIS[:2, 1:], _ROIS[1:, 1:]])  # [N=2, K=2, 4]
        ragged = tf.RaggedTensor.from_row_lengths(_ROIS[:, 1:], [1, 2])
        for cls, kwargs in _LAYERS:
            ps = cls in (tfco.layers.PSRoIPool, tfco.layers.PSRoIAlign)
            channels = 2 if ps else 12
            for data_format, pooled in (
                ("NHWC", (2, 3, channels)),
                ("NCHW", (channels, 2, 3)),
            ):
                layer = cls(data_format=data_format, **kwargs)
                for rois, leading, extra in (
                    (_ROIS, (3,), []),
                    (boxes, (2, 2), []),
                    (boxes, (2, 2), [np.array([2, 1], np.int32)]),
                    (ragged, (2, None), []),
                ):
                    with self.subTest(
                        layer=cls.__name__, data_format=data_format, rois=leading
                    ):
                        inputs = _inputs(cls, data_format, rois) + extra
                        out = layer(inputs)
                        self.assertEqual(
                            isinstance(out, tf.RaggedTensor),
                            isinstance(rois, tf.RaggedTensor),
                        )
                        expected = (*leading, *pooled)
                        self.assertEqual(tuple(out.shape), expected)
                        shapes = tf.nest.map_structure(lambda t: t.shape, inputs)
                        self.assertEqual(layer.compute_output_shape(shapes), expected)
                        if rois is _ROIS:
                            continue  # Keras inputs refuse [K, 5] rows.
                        # Keras inputs: the batch dimension unknown, K unknown
                        # and independent of it.
                        symbolic = layer(
                            tf.nest.map_structure(
                                lambda t: keras.Input(
                                    batch_shape=(None, *t.shape[1:]),
                                    dtype=t.dtype,
                                    ragged=isinstance(t, tf.RaggedTensor),
                                ),
                                inputs,
                            )
                        )
                        self.assertEqual(tuple(symbolic.shape), (None, *expected[1:]))
                        self.assertEqual(
                            symbolic.ragged, isinstance(rois, tf.RaggedTensor)
                        )

    def test_matches_the_op(self):
        features = _features("NCHW")
        layer = tfco.layers.RoIAlign(
            7,
            spatial_scale=0.5,
            sampling_ratio=2,
            aligned=True,
            data_format="channels_first",
        )
        expected = tfco.roi_align(
            features,
            _ROIS,
            7,
            spatial_scale=0.5,
            sampling_ratio=2,
            aligned=True,
            data_format="NCHW",
        )
        self.assertAllEqual(layer([features, _ROIS]), expected)

    def test_data_format_defaults_to_image_data_format(self):
        for image_data_format, expected in (
            ("channels_first", "NCHW"),
            ("channels_last", "NHWC"),
        ):
            with mock.patch.object(
                keras.backend, "image_data_format", return_value=image_data_format
            ):
                for cls, kwargs in _LAYERS:
                    self.assertEqual(cls(**kwargs).data_format, expected)

    def test_readable_default_names(self):
        names = [cls(**kwargs).name for cls, kwargs in _LAYERS]
        self.assertEqual(
            [n.rsplit("_", 1)[0] if n[-1].isdigit() else n for n in names],
            [
                "roi_pool",
                "roi_align",
                "ps_roi_pool",
                "ps_roi_align",
                "multi_scale_roi_align",
            ],
        )
        self.assertEqual(tfco.layers.RoIAlign(2, name="pool").name, "pool")

    def test_boxes_are_never_autocast(self):
        # Keras would round box coordinates to the compute dtype: 1030.5
        # becomes 1032 in bfloat16, 601 becomes 600.
        features = _features("NHWC", channels=4, size=(40, 40))
        boxes = np.array([[[100.0, 201.0, 1030.5, 601.0]]], np.float32)
        for policy, dtype in (
            ("mixed_bfloat16", tf.bfloat16),
            ("mixed_float16", tf.float16),
        ):
            with self.subTest(policy=policy):
                layer = tfco.layers.RoIAlign(
                    2, spatial_scale=1 / 32, sampling_ratio=2, dtype=policy
                )
                got = layer([features[:1], boxes])
                self.assertEqual(got.dtype, dtype)
                expected = tfco.roi_align(
                    tf.cast(features[:1], dtype),
                    boxes,
                    2,
                    spatial_scale=1 / 32,
                    sampling_ratio=2,
                )
                self.assertAllEqual(got, expected)
                rounded = tfco.roi_align(
                    tf.cast(features[:1], dtype),
                    tf.cast(tf.cast(boxes, dtype), tf.float32),
                    2,
                    spatial_scale=1 / 32,
                    sampling_ratio=2,
                )
                self.assertNotAllEqual(got, rounded)

    def test_float64_boxes_stay_float64_under_a_float64_policy(self):
        features = _features("NHWC", channels=4, size=(40, 40))
        boxes = np.array([[[100.0, 201.0, 1030.5, 601.0]]]) + 1e-4
        layer = tfco.layers.RoIAlign(
            2, spatial_scale=1 / 32, sampling_ratio=2, dtype="float64"
        )
        got = layer([features[:1], boxes])
        self.assertEqual(got.dtype, tf.float64)
        kwargs = dict(spatial_scale=1 / 32, sampling_ratio=2)
        features64 = tf.cast(features[:1], tf.float64)
        self.assertAllEqual(got, tfco.roi_align(features64, boxes, 2, **kwargs))
        rounded = boxes.astype(np.float32)
        self.assertNotAllEqual(got, tfco.roi_align(features64, rounded, 2, **kwargs))

    def test_compile_auto_picks_xla_on_gpu(self):
        # Keras' jit_compile="auto" means XLA when a GPU is listed and every
        # layer reports supports_jit, which the layers do when the XLA
        # lowerings are loaded.
        xla = tfco.build_info()["xla"]
        images = keras.Input((6, 7, 12))
        boxes = keras.Input((None, 4))
        pooled = tfco.layers.RoIAlign(2)([images, boxes])
        model = keras.Model([images, boxes], keras.layers.Flatten()(pooled))
        gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
        with mock.patch.object(tf.config, "list_physical_devices", return_value=[gpu]):
            model.compile(loss="mse")
        self.assertEqual(model.jit_compile, xla)
        for cls, kwargs in _LAYERS:
            self.assertEqual(cls(**kwargs).supports_jit, xla)

    def test_gradients_flow(self):
        for cls, kwargs in _LAYERS:
            with self.subTest(layer=cls.__name__):
                inputs = tf.nest.map_structure(tf.constant, _inputs(cls))
                with tf.GradientTape() as tape:
                    tape.watch(inputs)
                    loss = tf.reduce_sum(cls(**kwargs)(inputs) ** 2)
                grad = tape.gradient(loss, tf.nest.flatten(inputs)[0])
                self.assertGreater(float(tf.reduce_sum(tf.abs(grad))), 0.0)

    def test_bad_constructor_args(self):
        cases = [
            ({"output_size": 0}, ValueError, "output_size must be positive"),
            ({"output_size": (2, 2, 2)}, TypeError, "output_size must be an int"),
            ({"output_size": 2.5}, TypeError, "output_size must be an int or a pair"),
            ({"output_size": 2, "data_format": "NCWH"}, ValueError, "data_format"),
        ]
        for cls, kwargs in _LAYERS:
            for override, error, message in cases:
                with self.subTest(layer=cls.__name__, override=override):
                    with self.assertRaisesRegex(error, message):
                        cls(**{**kwargs, **override})
        multi_scale = tfco.layers.MultiScaleRoIAlign
        with self.assertRaisesRegex(ValueError, "needs spatial_scales, or image_size"):
            multi_scale(2)

    @parameterized.parameters(*_BAD_ARGUMENTS)
    def test_argument_errors_match_the_functions(self, argument, value, error, message):
        for cls, kwargs in _LAYERS:
            if argument not in inspect.signature(cls).parameters:
                continue
            kwargs = {**kwargs, argument: value}
            with self.subTest(layer=cls.__name__):
                with self.assertRaisesRegex(error, message) as from_layer:
                    cls(**kwargs)
                with self.assertRaisesRegex(error, message) as from_function:
                    _FUNCTIONS[cls](*_inputs(cls), **kwargs)
                self.assertEqual(
                    str(from_layer.exception), str(from_function.exception)
                )

    def test_other_keras_backends_are_refused(self):
        # Unchecked, KERAS_BACKEND=torch fails deep inside a call, on a torch
        # dtype.
        for backend in ("jax", "torch", "numpy"):
            with mock.patch.object(keras.backend, "backend", return_value=backend):
                for cls, kwargs in _LAYERS:
                    with self.subTest(backend=backend, layer=cls.__name__):
                        with self.assertRaisesRegex(
                            RuntimeError,
                            f"{cls.__name__} runs TensorFlow ops, but Keras runs "
                            f"on the '{backend}' backend: set "
                            "KERAS_BACKEND=tensorflow",
                        ):
                            cls(**kwargs)

    def test_call_forms_agree(self):
        boxes = np.stack([_ROIS[:2, 1:], _ROIS[1:, 1:]])  # [N=2, K=2, 4]
        counts = np.array([2, 1], np.int32)
        per_image = [boxes[0].tolist(), boxes[1, :1].tolist()]
        for cls, kwargs in _LAYERS:
            layer = cls(**kwargs)
            features, _ = _inputs(cls)
            with self.subTest(layer=cls.__name__):
                expected = layer([features, boxes, counts])
                self.assertEqual(tuple(expected.shape[:2]), (2, 2))
                for got in (
                    layer(features, boxes, counts),
                    layer(features, boxes, [2, 1]),
                    layer(features, boxes, box_counts=counts),
                    layer(features, boxes=boxes, box_counts=counts),
                    layer(inputs=features, boxes=boxes, box_counts=counts),
                    layer(tuple([features, boxes, counts])),
                ):
                    self.assertAllEqual(got, expected)
                self.assertAllEqual(layer(features, boxes), layer([features, boxes]))
                self.assertAllEqual(layer(features, _ROIS), layer([features, _ROIS]))
                # Per-image Python lists, which Keras alone would refuse as
                # call arguments.
                ragged = layer(features, per_image)
                self.assertIsInstance(ragged, tf.RaggedTensor)
                self.assertAllEqual(ragged.row_lengths(), [2, 1])
                self.assertAllEqual(
                    ragged.flat_values, expected[tf.sequence_mask(counts)]
                )
                self.assertAllEqual(layer([features, per_image]), ragged)

    def test_bad_call(self):
        layer = tfco.layers.RoIAlign(2)
        features, _ = _inputs(tfco.layers.RoIAlign)
        message = (
            r"RoIAlign takes features, boxes and optionally box_counts: "
            r"layer\(features, boxes, box_counts=None\) or layer\(\[features, "
            r"boxes\]\) or layer\(\[features, boxes, box_counts\]\); got no boxes, "
            r"and {}"
        )
        for inputs, got in (
            (features, "EagerTensor inputs"),
            ([features], "list of length 1 inputs"),
            ([features, _ROIS, None, None], "list of length 4 inputs"),
        ):
            with self.subTest(got=got):
                with self.assertRaisesRegex(ValueError, message.format(got)):
                    layer(inputs)
        with self.assertRaisesRegex(ValueError, message.format("EagerTensor")):
            layer(features, box_counts=[1, 1])
        with self.assertRaisesRegex(
            ValueError, r"got box_counts as an argument and the boxes in a list"
        ):
            layer([features, _ROIS], box_counts=[1, 1])

    def test_keras_inputs_refuse_rows(self):
        # fit fails at the second batch on such a model, and under jit_compile
        # it trains silently and predicts zeros for most rows.
        for cls, kwargs in _LAYERS:
            layer = cls(**kwargs)
            features = tf.nest.map_structure(
                lambda t: keras.Input(t.shape[1:]), _inputs(cls)[0]
            )
            for rows in (keras.Input((5,)), keras.Input((None,))):
                for args, call_kwargs in (
                    ((features, rows), {}),
                    (([features, rows],), {}),
                    ((features,), {"boxes": rows}),
                ):
                    with self.subTest(layer=cls.__name__, rows=rows.shape):
                        with self.assertRaisesRegex(
                            ValueError,
                            rf"{cls.__name__} got boxes of shape \(None, (5|None)\) "
                            r"from a Keras input: \[K, 5\] rows .* cannot go into a "
                            r"Keras model.* Give boxes per image: \[N, K, 4\] with "
                            r"box_counts .* or ragged \[N, None, 4\]",
                        ):
                            layer(*args, **call_kwargs)
            # Direct calls on tensors take them.
            self.assertEqual(layer(*_inputs(cls)).shape[0], len(_ROIS))

    def test_saved_functional_models_in_both_call_forms(self):
        boxes = np.stack([_ROIS[:2, 1:], _ROIS[1:, 1:]])
        counts = np.array([2, 1], np.int32)
        for cls, kwargs in _LAYERS:
            for form in ("arguments", "list"):
                with self.subTest(layer=cls.__name__, form=form):
                    features = tf.nest.map_structure(
                        lambda t: keras.Input(t.shape[1:]), _inputs(cls)[0]
                    )
                    box_input = keras.Input((None, 4))
                    count_input = keras.Input((), dtype="int32")
                    layer = cls(**kwargs)
                    if form == "arguments":
                        pooled = layer(features, box_input, count_input)
                    else:
                        pooled = layer([features, box_input, count_input])
                    inputs = [features, box_input, count_input]
                    model = keras.Model(inputs, pooled)
                    data = [_inputs(cls)[0], boxes, counts]
                    expected = layer(*data)
                    self.assertAllEqual(model(data), expected)
                    path = os.path.join(self.get_temp_dir(), f"{form}.keras")
                    model.save(path)
                    self.assertAllEqual(keras.saving.load_model(path)(data), expected)
                    rebuilt = keras.Model.from_config(model.get_config())
                    rebuilt.set_weights(model.get_weights())
                    self.assertAllEqual(rebuilt(data), expected)

    def test_bad_input_shapes(self):
        layer = tfco.layers.PSRoIAlign((2, 3))
        with self.assertRaisesRegex(
            ValueError, r"takes features, boxes and optionally box_counts"
        ):
            layer.compute_output_shape((2, 6, 7, 12))
        with self.assertRaisesRegex(ValueError, "features must have rank 4"):
            layer.compute_output_shape([(6, 7, 12), (3, 5)])
        with self.assertRaisesRegex(
            ValueError, r"boxes must have shape \[N, K, 4\] or \[K, 5\]"
        ):
            layer.compute_output_shape([(2, 6, 7, 12), (3, 4)])
        with self.assertRaisesRegex(ValueError, r"box_counts needs boxes of shape"):
            layer.compute_output_shape([(2, 6, 7, 12), (3, 5), (2,)])
        with self.assertRaisesRegex(
            ValueError, r"channels \(10\) must be divisible by .* \(6\)"
        ):
            layer([keras.Input((6, 7, 10)), keras.Input((None, 4))])
        multi_scale = tfco.layers.MultiScaleRoIAlign(2, spatial_scales=[1.0])
        with self.assertRaisesRegex(ValueError, "takes a list of feature maps"):
            multi_scale.compute_output_shape([(2, 6, 7, 12), (3, 5)])

    def test_pyramid_errors_when_the_model_is_built(self):
        # Not at a later trace with relaxed shapes (a second image size in
        # predict) or at export.
        boxes = keras.Input((None, 4))
        cases = [
            (
                dict(image_size=(32, 32)),
                [keras.Input((None, None, 8)), keras.Input((None, None, 8))],
                r"cannot infer spatial_scales: features\[0\] has an unknown height",
            ),
            (
                dict(spatial_scales=[0.25, 0.125]),
                [keras.Input((8, 8, 8)), keras.Input((4, 4, 4))],
                r"features must share one channel count, got \[4, 8\]",
            ),
            (
                dict(spatial_scales=[0.25, 0.125, 0.0625]),
                [keras.Input((8, 8, 8)), keras.Input((4, 4, 8))],
                r"spatial_scales must hold one scale per feature map \(2\), got 3",
            ),
        ]
        for kwargs, levels, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(ValueError, message):
                    tfco.layers.MultiScaleRoIAlign(2, **kwargs)(levels, boxes)
        images = keras.Input((8, 8, 8))
        for counts, error, message in (
            (
                keras.Input((), dtype="float32"),
                TypeError,
                "box_counts must be integers, got float32",
            ),
            (
                keras.Input((3,), dtype="int32"),
                ValueError,
                r"box_counts must have shape \[N\]",
            ),
        ):
            with self.subTest(message=message):
                with self.assertRaisesRegex(error, message):
                    tfco.layers.RoIAlign(2)([images, boxes, counts])
        with self.assertRaisesRegex(TypeError, "features must be float16"):
            tfco.layers.RoIAlign(2)([keras.Input((8, 8, 8), dtype="int32"), boxes])
        # Levels of other float dtypes are cast to the layer's compute dtype.
        pooled = tfco.layers.MultiScaleRoIAlign(2, spatial_scales=[0.25, 0.125])(
            [keras.Input((8, 8, 8)), keras.Input((4, 4, 8), dtype="float64")], boxes
        )
        self.assertEqual(pooled.dtype, "float32")
        with self.assertRaisesRegex(TypeError, "features must be float16"):
            tfco.layers.MultiScaleRoIAlign(2, spatial_scales=[0.25, 0.125])(
                [keras.Input((8, 8, 8)), keras.Input((4, 4, 8), dtype="int32")],
                boxes,
            )


if __name__ == "__main__":
    tf.test.main()
