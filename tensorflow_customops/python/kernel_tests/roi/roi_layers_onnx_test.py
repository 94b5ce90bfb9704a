"""Per-image boxes exported to ONNX: `tfco.roi_align` and friends with
`[N, K, 4]` boxes and `box_counts`, ragged boxes, `multi_scale_roi_align`,
and the Keras RoI layers in models, run in ONNX Runtime with dynamic batch
and box counts against TensorFlow, bit for bit.
"""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.onnx import export

_CHANNELS = 3


def _signature(levels=1, counts=True, data_format="NHWC"):
    features = (
        [None, None, None, _CHANNELS]
        if data_format == "NHWC"
        else [None, _CHANNELS, None, None]
    )
    signature = [tf.TensorSpec(features)] * levels + [tf.TensorSpec([None, None, 4])]
    return signature + [tf.TensorSpec([None], tf.int32)] if counts else signature


def _per_image_boxes(rng, images, boxes, image_size):
    """`[images, boxes, 4]` boxes in image coordinates: corners on .5 at
    scales 1/2 to 1/8 (multiples of 4), sub-pixel ones, some inverted and
    some off the image; padding rows NaN, which box_counts leaves out."""
    corners = rng.integers(-8, image_size + 8, (images, boxes, 4)) * 4.0
    corners[:, ::3, 2:] = corners[:, ::3, :2] + rng.uniform(0, 2, (images, 1, 2))
    return corners.astype(np.float32) / 4


def _counts(rng, images, boxes):
    counts = rng.integers(0, boxes + 1, images).astype(np.int32)
    counts[0] = boxes
    return counts


def _padded(boxes, counts):
    boxes = boxes.copy()
    for image, count in enumerate(counts):
        boxes[image, count:] = np.nan
    return boxes


class _ExportTestCase(parameterized.TestCase, tf.test.TestCase):
    def assert_exact(self, fn, signature, cases):
        """Exports `fn` once and checks it on every input list of `cases`
        (different batch and box counts)."""
        model = export.export(fn, signature)
        for inputs in cases:
            expected = fn(*inputs)
            got = onnx_test_util.run(model, inputs)[0]
            self.assertEqual(got.dtype, expected.dtype)
            np.testing.assert_array_equal(got, expected)
        return model

    def _cases(self, rng, levels=1, counts=True, data_format="NHWC", image_size=32):
        cases = []
        for images, boxes in [(2, 7), (1, 3), (4, 12)]:
            maps = []
            for level in range(levels):
                size = image_size // 2 ** (level + 1)
                shape = (images, size, size + 3, _CHANNELS)
                if data_format == "NCHW":
                    shape = (images, _CHANNELS, size, size + 3)
                maps.append(rng.standard_normal(shape).astype(np.float32))
            per_image = _per_image_boxes(rng, images, boxes, image_size)
            if counts:
                box_counts = _counts(rng, images, boxes)
                cases.append([*maps, _padded(per_image, box_counts), box_counts])
            else:
                cases.append([*maps, per_image])
        return cases


class PerImageBoxesTest(_ExportTestCase):
    @parameterized.parameters(["NHWC", "NCHW"])
    def test_functions_with_box_counts(self, data_format):
        rng = np.random.default_rng(1)
        kwargs = {"spatial_scale": 0.5, "data_format": data_format}
        for fn in (
            lambda f, b, c: tfco.roi_align(f, b, (2, 3), box_counts=c, **kwargs),
            lambda f, b, c: tfco.roi_align(
                f, b, 2, sampling_ratio=2, aligned=True, box_counts=c, **kwargs
            ),
            lambda f, b, c: tfco.roi_pool(f, b, (3, 2), box_counts=c, **kwargs),
        ):
            self.assert_exact(
                tf.function(fn),
                _signature(data_format=data_format),
                self._cases(rng, data_format=data_format),
            )

    def test_functions_without_box_counts(self):
        rng = np.random.default_rng(2)
        for fn in (
            lambda f, b: tfco.roi_align(f, b, 2, spatial_scale=0.5, aligned=True),
            lambda f, b: tfco.roi_pool(f, b, 2, spatial_scale=0.5),
        ):
            self.assert_exact(
                tf.function(fn),
                _signature(counts=False),
                self._cases(rng, counts=False),
            )

    @parameterized.parameters(["NHWC", "NCHW"])
    def test_multi_scale_roi_align(self, data_format):
        rng = np.random.default_rng(3)
        cases = self._cases(rng, levels=3, data_format=data_format)
        # Boxes on the level boundaries (sqrt(area) = 16 * 2^k), and an ulp
        # either side.
        for case in cases:
            sides = np.float32(16) * np.float32([0.5, 1, 2, 4])
            sides = np.concatenate(
                [sides, np.nextafter(sides, 0), np.nextafter(sides, 99)]
            )
            boundary = np.zeros([len(sides), 4], np.float32)
            boundary[:, 2:] = sides[:, None]
            boundary = np.broadcast_to(boundary, (len(case[3]), *boundary.shape))
            case[3] = np.concatenate([boundary, case[3]], 1)
            case[4] = case[4] + len(sides)

        @tf.function
        def fn(f1, f2, f3, boxes, counts):
            return tfco.multi_scale_roi_align(
                [f1, f2, f3],
                boxes,
                (2, 2),
                spatial_scales=[1 / 2, 1 / 4, 1 / 8],
                canonical_scale=16,
                canonical_level=2,
                data_format=data_format,
                box_counts=counts,
            )

        self.assert_exact(fn, _signature(levels=3, data_format=data_format), cases)

    def test_ragged_boxes(self):
        # tf2onnx takes a RaggedTensor as its flat values and row splits, and
        # gives the result so.
        fn = tf.function(lambda f, b: tfco.roi_align(f, b, 2, spatial_scale=0.5))
        ragged = tf.RaggedTensorSpec([None, None, 4], tf.float32, ragged_rank=1)
        model = export.export(fn, [_signature(counts=False)[0], ragged])
        rng = np.random.default_rng(4)
        for lengths in ([3, 0, 5], [1]):
            features = rng.standard_normal((len(lengths), 8, 9, _CHANNELS)).astype(
                np.float32
            )
            boxes = tf.RaggedTensor.from_row_lengths(
                _per_image_boxes(rng, 1, sum(lengths), 16)[0], lengths
            )
            expected = fn(features, boxes)
            values, splits = onnx_test_util.run(
                model, [features, boxes.flat_values.numpy(), boxes.row_splits.numpy()]
            )
            np.testing.assert_array_equal(values, expected.flat_values)
            np.testing.assert_array_equal(splits, expected.row_splits)


def _model(layer, levels=1, data_format="channels_last"):
    shape = (
        (None, None, _CHANNELS)
        if data_format == "channels_last"
        else (_CHANNELS, None, None)
    )
    features = [keras.Input(shape) for _ in range(levels)]
    boxes = keras.Input((None, 4))
    counts = keras.Input((), dtype="int32")
    pooled = layer([features if levels > 1 else features[0], boxes, counts])
    return keras.Model([*features, boxes, counts], pooled)


class KerasLayersTest(_ExportTestCase):
    def assert_model_exact(self, model, levels=1, data_format="NHWC", rng_seed=0):
        fn = tf.function(lambda *inputs: model(list(inputs)))
        rng = np.random.default_rng(rng_seed)
        self.assert_exact(
            fn,
            _signature(levels=levels, data_format=data_format),
            self._cases(rng, levels=levels, data_format=data_format),
        )

    @parameterized.parameters(["channels_last", "channels_first"])
    def test_roi_align_and_roi_pool(self, data_format):
        layout = "NHWC" if data_format == "channels_last" else "NCHW"
        for layer in (
            tfco.layers.RoIAlign(2, spatial_scale=0.5, data_format=data_format),
            tfco.layers.RoIAlign(
                (3, 2), spatial_scale=0.5, aligned=True, data_format=data_format
            ),
            tfco.layers.RoIPool((2, 3), spatial_scale=0.5, data_format=data_format),
        ):
            self.assert_model_exact(
                _model(layer, data_format=data_format), data_format=layout
            )

    def test_multi_scale_roi_align(self):
        layer = tfco.layers.MultiScaleRoIAlign(
            2, spatial_scales=[1 / 2, 1 / 4], canonical_scale=16, canonical_level=2
        )
        self.assert_model_exact(_model(layer, levels=2), levels=2)

    def test_mixed_precision(self):
        # The features pooled in float16, the boxes kept float32.
        layer = tfco.layers.RoIAlign(2, spatial_scale=0.5, dtype="mixed_float16")
        self.assert_model_exact(_model(layer))

    def test_ragged_input(self):
        features = keras.Input((None, None, _CHANNELS))
        boxes = keras.Input((None, 4), ragged=True)
        model = keras.Model(
            [features, boxes],
            tfco.layers.RoIAlign(2, spatial_scale=0.5)([features, boxes]),
        )
        fn = tf.function(lambda f, b: model([f, b]))
        ragged = tf.RaggedTensorSpec([None, None, 4], tf.float32, ragged_rank=1)
        rng = np.random.default_rng(5)
        features = rng.standard_normal((2, 8, 9, _CHANNELS)).astype(np.float32)
        boxes = tf.RaggedTensor.from_row_lengths(
            _per_image_boxes(rng, 1, 5, 16)[0], [2, 3]
        )
        expected = fn(features, boxes)
        # Given the signature, and from the model's own ragged input.
        for onnx_model in (
            export.export(fn, [_signature(counts=False)[0], ragged]),
            export.export(model),
        ):
            values, splits = onnx_test_util.run(
                onnx_model,
                [features, boxes.flat_values.numpy(), boxes.row_splits.numpy()],
            )
            np.testing.assert_array_equal(values, expected.flat_values)
            np.testing.assert_array_equal(splits, expected.row_splits)

    def test_position_sensitive_layers(self):
        for layer in (
            tfco.layers.PSRoIAlign(1, spatial_scale=0.5),
            tfco.layers.PSRoIPool(1, spatial_scale=0.5),
        ):
            self.assert_model_exact(_model(layer))


if __name__ == "__main__":
    tf.test.main()
