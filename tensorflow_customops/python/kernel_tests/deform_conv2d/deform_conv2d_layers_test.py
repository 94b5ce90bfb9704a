"""tfco.layers.DeformConv2D: its first output is half a regular convolution
(zero offsets, mask 0.5), later outputs are tfco.deform_conv2d of the
predicted offsets and mask; both layouts, mixed precision, get_config and a
saved model, argument errors, and a model that learns with fit."""

import os

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco


def _images(n=2, size=9, channels=4, seed=0):
    return (
        np.random.default_rng(seed)
        .normal(size=(n, size, size, channels))
        .astype(np.float32)
    )


class DeformConv2DTest(tf.test.TestCase, parameterized.TestCase):
    def tearDown(self):
        keras.mixed_precision.set_global_policy("float32")
        super().tearDown()

    @parameterized.product(
        padding=["valid", "same", 1, (2, 0)],
        data_format=["channels_last", "channels_first"],
    )
    def test_starts_as_half_a_convolution(self, padding, data_format):
        x = _images()
        layer = tfco.layers.DeformConv2D(
            6, (3, 2), padding=padding, groups=2, offset_groups=2,
            data_format=data_format, bias_initializer="ones",
        )  # fmt: skip
        nchw = data_format == "channels_first"
        y = layer(np.transpose(x, [0, 3, 1, 2]) if nchw else x)
        if nchw:
            y = tf.transpose(y, [0, 2, 3, 1])
        if isinstance(padding, str):
            conv_padding = padding.upper()
        else:
            top, left = (padding, padding) if isinstance(padding, int) else padding
            conv_padding = [[0, 0], [top, top], [left, left], [0, 0]]
        want = 0.5 * tf.nn.conv2d(x, layer.kernel, 1, conv_padding) + 1.0
        self.assertAllClose(y, want, rtol=1e-5, atol=1e-5)
        self.assertEqual(
            tuple(y.shape)[1:3],
            layer.compute_output_shape((2, 9, 9, 4))[1:3]
            if not nchw
            else layer.compute_output_shape((2, 4, 9, 9))[2:],
        )

    def test_uses_the_predicted_offsets_and_mask(self):
        x = _images(seed=1)
        layer = tfco.layers.DeformConv2D(3, 3, strides=2, padding="same")
        layer.build(x.shape)
        rng = np.random.default_rng(2)
        layer.offset_kernel.assign(rng.normal(size=layer.offset_kernel.shape) * 0.3)
        layer.offset_bias.assign(rng.normal(size=layer.offset_bias.shape))
        predicted = tf.nn.conv2d(x, layer.offset_kernel, 2, "SAME") + layer.offset_bias
        want = tfco.deform_conv2d(
            x,
            predicted[..., :18],
            layer.kernel,
            bias=layer.bias,
            strides=2,
            padding="SAME",
            mask=tf.sigmoid(predicted[..., 18:]),
        )
        self.assertAllClose(layer(x), want, rtol=1e-6, atol=1e-6)

    def test_without_mask_or_bias(self):
        layer = tfco.layers.DeformConv2D(2, 3, use_mask=False, use_bias=False)
        x = _images()
        y = layer(x)
        self.assertEqual(layer.offset_kernel.shape[-1], 18)
        self.assertIsNone(layer.bias)
        self.assertAllClose(y, tf.nn.conv2d(x, layer.kernel, 1, "VALID"), atol=1e-5)

    def test_mixed_precision(self):
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        layer = tfco.layers.DeformConv2D(4, 3, padding="same")
        y = layer(_images())
        self.assertEqual(y.dtype, tf.bfloat16)
        self.assertEqual(layer.kernel.dtype, "float32")

    def test_config_and_saved_model(self):
        inputs = keras.Input((9, 9, 4))
        outputs = tfco.layers.DeformConv2D(
            6, 3, dilation_rate=2, padding=(1, 2), groups=2, offset_groups=4,
            name="dcn",
        )(inputs)  # fmt: skip
        model = keras.Model(inputs, outputs)
        layer = model.get_layer("dcn")
        config = layer.get_config()
        clone = tfco.layers.DeformConv2D.from_config(config)
        self.assertEqual(clone.get_config(), config)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        restored = keras.models.load_model(path)
        x = _images(seed=3)
        self.assertAllEqual(restored(x), model(x))

    def test_exported(self):
        self.assertIn("DeformConv2D", tfco.layers.__all__)
        self.assertIs(
            tfco.layers.DeformConv2D,
            keras.saving.get_registered_object("tfco>DeformConv2D"),
        )

    def test_errors(self):
        with self.assertRaisesRegex(
            ValueError, "filters .* must be a multiple of groups"
        ):
            tfco.layers.DeformConv2D(3, 3, groups=2)
        with self.assertRaisesRegex(ValueError, "padding must be 'valid', 'same'"):
            tfco.layers.DeformConv2D(3, 3, padding="full")
        with self.assertRaisesRegex(ValueError, "offset_groups must be a positive int"):
            tfco.layers.DeformConv2D(3, 3, offset_groups=0)
        with self.assertRaisesRegex(ValueError, r"multiple of offset_groups \(3\)"):
            tfco.layers.DeformConv2D(3, 3, offset_groups=3)(_images())

    def test_input_errors_on_every_call(self):
        # Keras's checks, before the offset convolution sees the input: a
        # rank-3 input aborted TensorFlow's oneDNN Conv2D.
        layer = tfco.layers.DeformConv2D(2, 3)
        for call in (
            lambda x: layer(keras.Input(x.shape[1:], batch_size=x.shape[0])),
            lambda x: layer(x),
        ):
            with self.assertRaisesRegex(ValueError, "expected ndim=4, found ndim=3"):
                call(tf.ones([8, 8, 4]))
            with self.assertRaisesRegex(ValueError, "expected ndim=4, found ndim=5"):
                call(tf.ones([1, 2, 8, 8, 4]))
            with self.assertRaisesRegex(
                ValueError, r"does not fit an input of height and width \(2, 2\)"
            ):
                call(tf.ones([1, 2, 2, 4]))
        layer(tf.ones([1, 8, 8, 4]))
        with self.assertRaisesRegex(ValueError, "expected axis -1 of input shape"):
            layer(tf.ones([1, 8, 8, 6]))
        with self.assertRaisesRegex(TypeError, "floating-point inputs, got int32"):
            tfco.layers.DeformConv2D(2, 3)(tf.ones([1, 8, 8, 4], tf.int32))

    def test_argument_types(self):
        layer = tfco.layers.DeformConv2D(np.int64(4), 3, groups=np.int32(2))
        self.assertEqual((layer.filters, layer.groups), (4, 2))
        self.assertIs(type(layer.get_config()["filters"]), int)
        for name in ("use_mask", "use_bias"):
            with self.assertRaisesRegex(ValueError, f"{name} must be a bool, got 'no'"):
                tfco.layers.DeformConv2D(4, 3, **{name: "no"})

    def test_fit_learns(self):
        """A one-layer model fits a shifted difference of its input channels
        with fit, and the offset convolution (zero at the start) trains."""
        keras.utils.set_random_seed(4)
        x = _images(n=16, size=8, channels=2, seed=5)
        target = np.roll(x, 1, axis=1)[..., :1] - x[..., 1:]
        model = keras.Sequential(
            [keras.Input((8, 8, 2)), tfco.layers.DeformConv2D(1, 3, padding="same")]
        )
        model.compile(keras.optimizers.Adam(0.05), "mse", jit_compile=False)
        history = model.fit(x, target, epochs=30, batch_size=8, verbose=0)
        losses = history.history["loss"]
        self.assertLess(losses[-1], 0.2 * losses[0])
        self.assertGreater(np.abs(model.layers[-1].offset_kernel.numpy()).max(), 0)


if __name__ == "__main__":
    tf.test.main()
