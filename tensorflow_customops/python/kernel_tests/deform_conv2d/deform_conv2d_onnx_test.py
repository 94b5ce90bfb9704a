"""Export of DeformableConv2d to ONNX DeformConv-19, run in ONNX Runtime
against the TensorFlow kernels: with and without mask, groups, offset
groups, strides, dilations, SAME (odd pixel after), VALID and explicit
padding, both layouts, dynamic batch and sizes, every dtype, the Keras
layer, and the refusals."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.onnx import errors, export

# ORT's kernel and the library's sum the K = C / groups * kh * kw products of
# an output in different orders. With inputs and filter in [-1, 1] and the
# mask in [0, 1] the sum is at most K, and the orders differ by a few of its
# ulps: atol = K * eps of the type computed in (float for half and bfloat16)
# bounds that with a margin. Half and bfloat16 then round the float result
# once, which may differ by one of their ulps (rtol).
_EPS = {
    tf.float64: np.finfo(np.float64).eps,
    tf.float32: np.finfo(np.float32).eps,
    tf.float16: np.finfo(np.float32).eps,
    tf.bfloat16: np.finfo(np.float32).eps,
}
_ROUNDING = {tf.float16: 2.0**-10, tf.bfloat16: 2.0**-7}


def _size(value):
    return (value, value) if isinstance(value, int) else value


def _output_size(n, k, stride, dilation, padding):
    window = (k - 1) * dilation + 1
    if padding == "SAME":
        return -(-n // stride)
    before, after = (0, 0) if padding == "VALID" else padding
    return (n + before + after - window) // stride + 1


def _case(
    rng,
    batch=2,
    size=(7, 6),
    channels=4,
    filters=6,
    kernel=(3, 3),
    strides=1,
    padding="VALID",
    dilations=1,
    groups=1,
    offset_groups=1,
    mask=True,
    data_format="NHWC",
):
    """Random float64 [input, offset, filter, mask] of one call (mask None
    without one) in data_format, and the tfco.deform_conv2d kwargs."""
    strides, dilations = _size(strides), _size(dilations)
    explicit = (padding, padding) if isinstance(padding, str) else padding
    ho, wo = (
        _output_size(*args) for args in zip(size, kernel, strides, dilations, explicit)
    )
    taps = offset_groups * kernel[0] * kernel[1]
    x = rng.uniform(-1, 1, (batch, *size, channels))
    w = rng.uniform(-1, 1, (*kernel, channels // groups, filters))
    # Offsets up to 3 pixels take taps off the map and across its border.
    offset = rng.uniform(-3, 3, (batch, ho, wo, 2 * taps))
    # Some taps on whole and half pixels, the map's edges among them.
    offset[..., ::3] = np.round(offset[..., ::3] * 2) / 2
    m = rng.uniform(0, 1, (batch, ho, wo, taps)) if mask else None
    arrays = [x, offset, w, m]
    if data_format == "NCHW":
        arrays = [
            a if a is None or a is w else np.transpose(a, [0, 3, 1, 2]) for a in arrays
        ]
    kwargs = dict(
        strides=strides,
        padding=padding,
        dilations=dilations,
        data_format=data_format,
    )
    return arrays, kwargs


def _function(arrays, kwargs, dtype, dynamic):
    """A tf.function of tfco.deform_conv2d over (input, offset, filter[,
    mask]) and its input signature; `dynamic` leaves the batch ("batch") or
    the batch and every spatial size ("all") unknown."""
    specs = []
    for a in arrays:
        if a is None:
            continue
        shape = list(a.shape)
        if a.ndim == 4 and a is not arrays[2]:
            if dynamic in ("batch", "all"):
                shape[0] = None
            if dynamic == "all":
                spatial = (2, 3) if kwargs["data_format"] == "NCHW" else (1, 2)
                for d in spatial:
                    shape[d] = None
        specs.append(tf.TensorSpec(shape, dtype))
    has_mask = arrays[3] is not None

    @tf.function(input_signature=specs)
    def fn(x, offset, w, *mask):
        return tfco.deform_conv2d(
            x, offset, w, mask=mask[0] if has_mask else None, **kwargs
        )

    return fn, specs


class DeformableConv2dOnnxTest(tf.test.TestCase, parameterized.TestCase):
    def _compare(self, model, fn, arrays, dtype=tf.float32):
        """Runs `model` and `fn` on `arrays` and compares their outputs."""
        inputs = [tf.constant(a, dtype) for a in arrays if a is not None]
        expected = tf.cast(fn(*inputs), tf.float64).numpy()
        (actual,) = onnx_test_util.run(model, [t.numpy() for t in inputs])
        actual = np.asarray(actual).astype(np.float64)
        self.assertEqual(actual.shape, expected.shape)
        w = arrays[2]
        reduction = w.shape[0] * w.shape[1] * w.shape[2]
        self.assertAllClose(
            actual,
            expected,
            rtol=_ROUNDING.get(dtype, 0.0),
            atol=reduction * _EPS[dtype],
        )

    def _check(self, arrays, kwargs, dtype=tf.float32, **export_kw):
        """Exports the call with a dynamic batch at the opset the export
        picks, DeformConv's 19, compares ORT with TensorFlow; returns the
        model."""
        fn, specs = _function(arrays, kwargs, dtype, "batch")
        model = export.export(fn, specs, **export_kw)
        self.assertIn("DeformConv", [n.op_type for n in model.graph.node])
        (opset,) = [
            o.version for o in model.opset_import if o.domain in ("", "ai.onnx")
        ]
        self.assertEqual(opset, 19)
        self._compare(model, fn, arrays, dtype)
        return model

    @parameterized.product(
        data_format=["NHWC", "NCHW"],
        config=[
            dict(),
            dict(mask=False),
            dict(groups=2, offset_groups=2),
            dict(groups=2, offset_groups=1, mask=False),
            dict(groups=1, offset_groups=2, strides=2, padding="SAME"),
            # SAME with stride 2 on an even size pads the odd pixel after.
            dict(size=(8, 6), strides=2, padding="SAME", dilations=2),
            dict(strides=(2, 1), dilations=(1, 2), padding="SAME", kernel=(3, 2)),
            dict(padding=((1, 2), (0, 3)), strides=(1, 2), groups=2),
            dict(padding=((2, 2), (1, 1)), kernel=(1, 3), offset_groups=4),
        ],
    )
    def test_float32(self, data_format, config):
        arrays, kwargs = _case(
            np.random.default_rng(0), data_format=data_format, **config
        )
        self._check(arrays, kwargs)

    @parameterized.product(
        data_format=["NHWC", "NCHW"],
        config=[
            # SAME with stride 1 pads the same whatever the size.
            dict(padding="SAME", dilations=(2, 1), groups=2),
            # With a stride above 1 it pads by the size, found at run time.
            dict(padding="SAME", strides=(2, 3), dilations=(1, 2), offset_groups=2),
            dict(padding=((1, 2), (2, 0)), strides=2, mask=False),
        ],
    )
    def test_dynamic_sizes(self, data_format, config):
        model = fn = None
        for seed, size in enumerate([(8, 7), (9, 6), (4, 9)]):
            arrays, kwargs = _case(
                np.random.default_rng(seed),
                size=size,
                data_format=data_format,
                **config,
            )
            if model is None:
                fn, specs = _function(arrays, kwargs, tf.float32, "all")
                model = export.export(fn, specs, opset=19)
            self._compare(model, fn, arrays)

    @parameterized.product(data_format=["NHWC", "NCHW"], dtype=[tf.float64, tf.float16])
    def test_dtypes(self, data_format, dtype):
        arrays, kwargs = _case(
            np.random.default_rng(2),
            strides=2,
            padding="SAME",
            groups=2,
            offset_groups=2,
            data_format=data_format,
        )
        self._check(arrays, kwargs, dtype)

    @parameterized.parameters("NHWC", "NCHW")
    def test_bfloat16(self, data_format):
        # ORT's Python API takes no bfloat16 arrays: the model's inputs and
        # output are float, cast to and from bfloat16 around the op.
        arrays, kwargs = _case(
            np.random.default_rng(3), padding="SAME", data_format=data_format
        )
        fn, specs = _function(arrays, kwargs, tf.bfloat16, "batch")
        specs = [tf.TensorSpec(s.shape, tf.float32) for s in specs]

        @tf.function(input_signature=specs)
        def widened(*args):
            y = fn(*(tf.cast(a, tf.bfloat16) for a in args))
            return tf.cast(y, tf.float32)

        inputs = [
            tf.cast(tf.constant(a, tf.bfloat16), tf.float32).numpy()
            for a in arrays
            if a is not None
        ]
        expected, actual, model = onnx_test_util.export_and_run(
            widened, specs, inputs, opset=19
        )
        self.assertIn("DeformConv", [n.op_type for n in model.graph.node])
        self.assertAllClose(actual[0], expected[0], rtol=2.0**-7, atol=1e-5)

    @parameterized.parameters("channels_last", "channels_first")
    def test_keras_layer(self, data_format):
        # Of the Keras model's traced call, as the export takes tf.functions.
        shape = [6, 9, 4] if data_format == "channels_last" else [4, 6, 9]
        inputs = keras.Input(shape)
        layer = tfco.layers.DeformConv2D(
            6,
            3,
            strides=2,
            padding="same",
            groups=2,
            offset_groups=2,
            data_format=data_format,
        )
        model = keras.Model(inputs, layer(inputs))
        # Random offset weights, so that the taps leave the regular grid.
        rng = np.random.default_rng(4)
        layer.set_weights(
            [rng.uniform(-0.5, 0.5, w.shape) for w in layer.get_weights()]
        )
        spec = tf.TensorSpec([None, *shape], tf.float32)
        fn = tf.function(lambda x: model(x), input_signature=[spec])
        x = rng.uniform(-1, 1, [3, *shape]).astype(np.float32)
        expected, actual, _ = onnx_test_util.export_and_run(fn, [spec], [x], opset=19)
        # 18 products per output, and offsets from a convolution of their own.
        self.assertAllClose(actual[0], expected[0], rtol=0, atol=36 * _EPS[tf.float32])

    @parameterized.product(
        data_format=["NHWC", "NCHW"],
        config=[
            dict(size=(9, 7), padding="SAME"),
            dict(size=(8, 7), padding="SAME"),
            dict(size=(9, 7), padding=((1, 2), (3, 1))),
        ],
    )
    def test_tensorrt(self, data_format, config):
        # TensorRT's DeformConv takes equal padding at both ends of each
        # axis; a Pad of the input makes up the rest.
        arrays, kwargs = _case(
            np.random.default_rng(5), strides=2, data_format=data_format, **config
        )
        model = self._check(arrays, kwargs, target="tensorrt")
        (conv,) = [n for n in model.graph.node if n.op_type == "DeformConv"]
        (pads,) = [a.ints for a in conv.attribute if a.name == "pads"]
        self.assertEqual(pads[:2], pads[2:])

    def test_off_map_and_empty(self):
        arrays, kwargs = _case(np.random.default_rng(6), padding="SAME")
        fn, specs = _function(arrays, kwargs, tf.float32, "batch")
        model = export.export(fn, specs, opset=19)
        x, offset, w, mask = arrays
        # Infinite and huge offsets take a tap off the map: 0 in both.
        for value in (np.inf, -np.inf, 1e30, -1e30):
            moved = offset.copy()
            moved[:, 2, 3, ::5] = value
            self._compare(model, fn, [x, moved, w, mask])
        # A NaN offset gives NaN in TensorFlow (as torchvision); ONNX
        # Runtime takes its tap as off the map.
        moved = offset.copy()
        moved[0, 2, 3, 0] = np.nan
        inputs = [a.astype(np.float32) for a in (x, moved, w, mask)]
        expected = fn(*inputs).numpy()
        (actual,) = onnx_test_util.run(model, inputs)
        self.assertTrue(np.isnan(expected[0, 2, 3]).all())
        self.assertTrue(np.isfinite(actual).all())
        off_map = offset.copy()
        off_map[0, 2, 3, 0] = np.inf
        self._compare(model, fn, [x, off_map, w, mask])
        (off_map_actual,) = onnx_test_util.run(
            model, [a.astype(np.float32) for a in (x, off_map, w, mask)]
        )
        self.assertAllEqual(actual, off_map_actual)
        # An empty batch.
        self._compare(
            model, fn, [a[:0] if a.ndim == 4 and a is not w else a for a in arrays]
        )

    def _refused(self, specs, message, **kwargs):
        @tf.function(input_signature=specs)
        def fn(x, offset, w):
            return tfco.deform_conv2d(x, offset, w, **kwargs)

        with self.assertRaisesRegex(errors.ExportError, message):
            export.export(fn, specs, opset=19)

    def test_refusals(self):
        self._refused(
            [
                tf.TensorSpec([None, 6, 6, None]),
                tf.TensorSpec([None, 4, 4, 18]),
                tf.TensorSpec([3, 3, 2, 2]),
            ],
            "the input's channels must be known",
        )
        self._refused(
            [
                tf.TensorSpec([None, 6, 6, 4]),
                tf.TensorSpec([None, 4, 4, None]),
                tf.TensorSpec([3, 3, 4, 2]),
            ],
            "offset_groups is 0 and the offset's channels are not known",
        )
        self._refused(
            [
                tf.TensorSpec([None, 6, 6, 4]),
                tf.TensorSpec([None, 4, 4, 18]),
                tf.TensorSpec([None, 3, 4, 2]),
            ],
            "the filter's shape must be known",
        )


if __name__ == "__main__":
    tf.test.main()
