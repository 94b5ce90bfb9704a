"""tfco.layers RoI layers: config round trips, output shapes in both layouts,
constructor validation, and gradients through the layers."""

import keras
import numpy as np
import tensorflow as tf

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
]
_ROIS = np.array(
    [[0, 1.0, 1.0, 9.0, 7.0], [1, 0.0, 2.0, 5.0, 11.0], [0, 3.0, 0.0, 11.0, 11.0]],
    np.float32,
)


def _features(data_format, channels=12):
    shape = (2, 6, 7, channels) if data_format == "NHWC" else (2, channels, 6, 7)
    return np.random.default_rng(0).normal(size=shape).astype(np.float32)


class RoiLayersTest(tf.test.TestCase):
    def test_exported(self):
        self.assertEqual(
            sorted(tfco.layers.__all__),
            ["PSRoIAlign", "PSRoIPool", "RoIAlign", "RoIPool"],
        )

    def test_config_round_trip(self):
        for cls, kwargs in _LAYERS:
            for data_format in ("NHWC", "NCHW"):
                with self.subTest(layer=cls.__name__, data_format=data_format):
                    layer = cls(data_format=data_format, name="roi", **kwargs)
                    config = layer.get_config()
                    self.assertEqual(config["output_size"], [2, 3])
                    self.assertEqual(config["data_format"], data_format)
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
        features = _features("NHWC")
        for cls, kwargs in _LAYERS:
            with self.subTest(layer=cls.__name__):
                layer = cls(**kwargs)
                restored = keras.saving.deserialize_keras_object(
                    keras.saving.serialize_keras_object(layer)
                )
                self.assertAllEqual(
                    layer([features, _ROIS]), restored([features, _ROIS])
                )

    def test_output_shapes(self):
        for cls, kwargs in _LAYERS:
            ps = cls in (tfco.layers.PSRoIPool, tfco.layers.PSRoIAlign)
            channels = 2 if ps else 12
            for data_format, expected in (
                ("NHWC", (3, 2, 3, channels)),
                ("NCHW", (3, channels, 2, 3)),
            ):
                with self.subTest(layer=cls.__name__, data_format=data_format):
                    layer = cls(data_format=data_format, **kwargs)
                    features = _features(data_format)
                    self.assertEqual(tuple(layer([features, _ROIS]).shape), expected)
                    self.assertEqual(
                        layer.compute_output_shape([features.shape, _ROIS.shape]),
                        expected,
                    )
                    # Symbolic inputs: K unknown, independent of the image batch.
                    image_shape = features.shape[1:]
                    symbolic = layer(
                        [keras.Input(image_shape), keras.Input((5,), batch_size=None)]
                    )
                    self.assertEqual(tuple(symbolic.shape), (None, *expected[1:]))

    def test_matches_the_op(self):
        features = _features("NCHW")
        layer = tfco.layers.RoIAlign(
            7, spatial_scale=0.5, sampling_ratio=2, aligned=True, data_format="NCHW"
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

    def test_gradients_flow(self):
        features = tf.constant(_features("NHWC"))
        for cls, kwargs in _LAYERS:
            with self.subTest(layer=cls.__name__):
                with tf.GradientTape() as tape:
                    tape.watch(features)
                    loss = tf.reduce_sum(cls(**kwargs)([features, _ROIS]) ** 2)
                grad = tape.gradient(loss, features)
                self.assertEqual(grad.shape, features.shape)
                self.assertGreater(float(tf.reduce_sum(tf.abs(grad))), 0.0)

    def test_bad_constructor_args(self):
        cases = [
            ({"output_size": 0}, "output_size must be positive"),
            ({"output_size": (2, 2, 2)}, "output_size must be an int or a pair"),
            ({"output_size": 2.5}, "output_size must be an int or a pair"),
            ({"output_size": 2, "spatial_scale": 0}, "spatial_scale must be a finite"),
            ({"output_size": 2, "spatial_scale": float("nan")}, "finite positive"),
            ({"output_size": 2, "spatial_scale": "1"}, "spatial_scale must be"),
            ({"output_size": 2, "data_format": "NCWH"}, "data_format must be"),
            ({"output_size": 2, "data_format": "channels_last"}, "'NHWC' or 'NCHW'"),
        ]
        for cls, _ in _LAYERS:
            for kwargs, message in cases:
                with self.subTest(layer=cls.__name__, kwargs=kwargs):
                    with self.assertRaisesRegex(ValueError, message):
                        cls(**kwargs)
        align_cases = [
            ({"sampling_ratio": 65}, "sampling_ratio must be at most 64"),
            ({"sampling_ratio": 2.0}, "sampling_ratio must be an int"),
            ({"sampling_ratio": True}, "sampling_ratio must be an int"),
        ]
        for cls in (tfco.layers.RoIAlign, tfco.layers.PSRoIAlign):
            for kwargs, message in align_cases:
                with self.subTest(layer=cls.__name__, kwargs=kwargs):
                    with self.assertRaisesRegex(ValueError, message):
                        cls(2, **kwargs)
        with self.assertRaisesRegex(ValueError, "aligned must be a bool"):
            tfco.layers.RoIAlign(2, aligned=1)

    def test_bad_input_shapes(self):
        layer = tfco.layers.PSRoIAlign((2, 3))
        with self.assertRaisesRegex(ValueError, r"takes \[features, rois\]"):
            layer.compute_output_shape((2, 6, 7, 12))
        with self.assertRaisesRegex(ValueError, "features must have rank 4"):
            layer.compute_output_shape([(6, 7, 12), (3, 5)])
        with self.assertRaisesRegex(ValueError, r"rois must have shape \[K, 5\]"):
            layer.compute_output_shape([(2, 6, 7, 12), (3, 4)])
        with self.assertRaisesRegex(
            ValueError, r"channels \(10\) must be divisible by .* \(6\)"
        ):
            layer([keras.Input((6, 7, 10)), keras.Input((5,))])


if __name__ == "__main__":
    tf.test.main()
