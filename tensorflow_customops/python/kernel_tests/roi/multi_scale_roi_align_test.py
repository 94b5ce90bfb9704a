"""tfco.multi_scale_roi_align and tfco.layers.MultiScaleRoIAlign: FPN level
assignment (canonical scale and level, clamping), inferred and given scales,
every box form, gradients, argument errors, and parity with torchvision's
MultiScaleRoIAlign when torchvision is importable."""

# torch must be loaded before TensorFlow: the other order crashes at import.
try:
    import torch
    import torchvision

    _SKIP_REASON = None
except ImportError as e:  # optional dependency
    _SKIP_REASON = f"torchvision is not installed ({e}); parity test skipped"

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco

_IMAGE_SIZE = (256, 320)
_STRIDES = (4, 8, 16, 32)


def _pyramid(data_format="NHWC", batch=2, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    height, width = _IMAGE_SIZE
    shapes = [(batch, height // s, width // s, channels) for s in _STRIDES]
    levels = [rng.standard_normal(shape) for shape in shapes]
    if data_format == "NCHW":
        levels = [np.transpose(f, [0, 3, 1, 2]) for f in levels]
    return levels


def _boxes(batch=2, count=40, seed=1):
    """Boxes of sizes from 2 to 1500 pixels: every level, and clamping at both
    ends."""
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 200, size=(batch, count, 2))
    size = np.exp(rng.uniform(np.log(2), np.log(1500), size=(batch, count, 2)))
    return np.concatenate([corner, corner + size], -1).astype(np.float32)


def _rows(boxes):
    index = np.repeat(np.arange(len(boxes)), boxes.shape[1])[:, None]
    return np.concatenate([index, boxes.reshape(-1, 4)], 1).astype(np.float32)


def _expected_levels(rows, canonical_scale=224, canonical_level=4, first=2, last=5):
    """FPN eq. 1, in float64 Python (away from level boundaries)."""
    levels = []
    for _, x1, y1, x2, y2 in rows:
        level = math.floor(
            canonical_level
            + math.log2(math.sqrt((x2 - x1) * (y2 - y1)) / canonical_scale)
        )
        levels.append(min(max(level, first), last) - first)
    return np.array(levels)


class MultiScaleRoiAlignTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.parameters("NHWC", "NCHW")
    def test_each_box_pooled_from_its_level(self, data_format):
        features = _pyramid(data_format)
        rows = _rows(_boxes())
        levels = _expected_levels(rows)
        self.assertEqual(set(levels), {0, 1, 2, 3})  # every level is used
        got = tfco.multi_scale_roi_align(
            features,
            rows,
            7,
            image_size=_IMAGE_SIZE,
            sampling_ratio=2,
            data_format=data_format,
        )
        for level, stride in enumerate(_STRIDES):
            mine = levels == level
            expected = tfco.roi_align(
                features[level],
                rows[mine],
                7,
                spatial_scale=1 / stride,
                sampling_ratio=2,
                data_format=data_format,
            )
            self.assertAllEqual(tf.boolean_mask(got, mine), expected)

    def test_canonical_scale_and_level(self):
        features = [tf.fill([1, 16, 16, 1], float(i)) for i in range(3)]
        scales = [1 / 4, 1 / 8, 1 / 16]
        # A box of size canonical_scale goes to canonical_level (level 3 is
        # the second map); twice as large, one level up; far smaller or larger
        # boxes clamp to the first and last levels.
        boxes = [[0, 0, 0, s, s] for s in (32, 64, 31.9, 1, 200)]
        got = tfco.multi_scale_roi_align(
            features,
            boxes,
            1,
            spatial_scales=scales,
            canonical_scale=32,
            canonical_level=3,
        )
        self.assertAllEqual(got[:, 0, 0, 0], [1, 2, 0, 0, 2])
        # A box with a negative area goes to the first level.
        got = tfco.multi_scale_roi_align(
            features, [[0, 10, 0, 0, 10]], 1, spatial_scales=scales
        )
        self.assertAllEqual(got[:, 0, 0, 0], [0])

    def test_inferred_scales_equal_given(self):
        features = _pyramid()
        rows = _rows(_boxes())
        inferred = tfco.multi_scale_roi_align(features, rows, 3, image_size=_IMAGE_SIZE)
        given = tfco.multi_scale_roi_align(
            features, rows, 3, spatial_scales=[1 / s for s in _STRIDES]
        )
        self.assertAllEqual(inferred, given)
        # A padded image size still rounds to the same powers of two.
        padded = tfco.multi_scale_roi_align(features, rows, 3, image_size=(250, 330))
        self.assertAllEqual(padded, given)

    def test_box_forms_agree(self):
        features = _pyramid()
        boxes = _boxes(count=6)
        kwargs = dict(output_size=2, image_size=_IMAGE_SIZE, sampling_ratio=2)
        rows = tfco.multi_scale_roi_align(features, _rows(boxes), **kwargs)
        batched = tfco.multi_scale_roi_align(features, boxes, **kwargs)
        self.assertAllEqual(tf.reshape(batched, rows.shape), rows)
        counts = [6, 2]
        padded = tfco.multi_scale_roi_align(
            features, boxes, box_counts=counts, **kwargs
        )
        self.assertAllEqual(padded[1, :2], batched[1, :2])
        self.assertAllEqual(padded[1, 2:], tf.zeros_like(padded[1, 2:]))
        ragged = tf.RaggedTensor.from_row_lengths(
            np.concatenate([boxes[0], boxes[1, :2]]), counts
        )
        out = tfco.multi_scale_roi_align(features, ragged, **kwargs)
        self.assertAllEqual(out.to_tensor(), padded)
        per_image = [boxes[0].tolist(), boxes[1, :2].tolist()]
        listed = tfco.multi_scale_roi_align(features, per_image, **kwargs)
        self.assertIsInstance(listed, tf.RaggedTensor)
        self.assertAllEqual(listed, out)
        single = tfco.multi_scale_roi_align(
            features[:1], boxes, spatial_scales=[0.25], output_size=2, sampling_ratio=2
        )
        self.assertAllEqual(
            single, tfco.roi_align(features[0], boxes, 2, 0.25, sampling_ratio=2)
        )

    def test_float64_boxes_keep_their_dtype(self):
        # Each level pools its boxes in float64, as roi_align does them.
        features = _pyramid()
        boxes = _boxes(count=6).astype(np.float64)
        boxes += np.random.default_rng(2).uniform(-1e-3, 1e-3, boxes.shape)
        rows = np.concatenate(
            [np.repeat([[0.0], [1.0]], 6, 0), boxes.reshape(-1, 4)], 1
        )
        kwargs = dict(output_size=2, sampling_ratio=2, canonical_scale=224)
        scales = [1 / 4, 1 / 8, 1 / 16, 1 / 32]
        got = tfco.multi_scale_roi_align(
            features, rows, spatial_scales=scales, **kwargs
        )
        levels = _expected_levels(rows)
        expected = np.zeros(got.shape)
        for level, scale in enumerate(scales):
            pick = np.flatnonzero(levels == level)
            expected[pick] = tfco.roi_align(
                features[level], rows[pick], 2, scale, sampling_ratio=2
            )
        self.assertAllEqual(got, expected)
        batched = tfco.multi_scale_roi_align(
            features, boxes, spatial_scales=scales, **kwargs
        )
        self.assertAllEqual(tf.reshape(batched, got.shape), got)
        rounded = tfco.multi_scale_roi_align(
            features, rows.astype(np.float32), spatial_scales=scales, **kwargs
        )
        self.assertNotAllEqual(got, rounded)

    def test_no_boxes(self):
        out = tfco.multi_scale_roi_align(
            _pyramid(), np.zeros([0, 5], np.float32), 2, image_size=_IMAGE_SIZE
        )
        self.assertEqual(out.shape, [0, 2, 2, 3])

    def test_gradient_matches_numeric_jacobian(self):
        features = [
            tf.constant(
                np.random.default_rng(i).standard_normal([1, 8 >> i, 8 >> i, 2])
            )
            for i in range(2)
        ]
        boxes = [[0, 1, 1, 6, 7], [0, 0, 0, 30, 30], [0, 2.5, 3, 5, 4]]

        def fn(*levels):
            return tfco.multi_scale_roi_align(
                list(levels),
                boxes,
                2,
                spatial_scales=[0.25, 0.125],
                canonical_scale=8,
                canonical_level=2,
                sampling_ratio=2,
            )

        theoretical, numerical = tf.test.compute_gradient(fn, features)
        for t, n in zip(theoretical, numerical):
            self.assertAllClose(t, n, rtol=1e-6, atol=1e-6)
            self.assertGreater(np.count_nonzero(t), 0)

    def test_tf_function_with_unknown_shapes(self):
        features = _pyramid()
        boxes = _boxes()
        spec = tf.TensorSpec([None, None, None, 3], tf.float64)

        @tf.function(
            input_signature=[[spec] * 4, tf.TensorSpec([None, None, 4], tf.float32)]
        )
        def fn(levels, boxes):
            return tfco.multi_scale_roi_align(
                levels, boxes, 2, spatial_scales=[1 / s for s in _STRIDES]
            )

        expected = tfco.multi_scale_roi_align(
            features, boxes, 2, image_size=_IMAGE_SIZE
        )
        self.assertAllEqual(fn(features, boxes), expected)

    def test_graph_and_jit_agree_with_eager(self):
        # Padded boxes with box_counts, float64 rows, and rows of unknown
        # width, forward and gradient: under jit the levels are pooled in
        # place, in graphs and eagerly partitioned.
        features = [tf.constant(f) for f in _pyramid(batch=2)]
        boxes = tf.constant(_boxes(count=5))
        counts = tf.constant([2, 5])
        rows = tf.constant(_rows(_boxes(count=5)).astype(np.float64))
        spec = [tf.TensorSpec([None, None, None, 3], tf.float64)] * 4
        scales = [1 / s for s in _STRIDES]

        def forward_and_gradient(levels, rois, box_counts=None):
            with tf.GradientTape() as tape:
                tape.watch([levels, rois])
                out = tfco.multi_scale_roi_align(
                    levels, rois, 2, spatial_scales=scales, box_counts=box_counts
                )
                loss = tf.reduce_sum(out * out)
            return [out, *tape.gradient(loss, [levels, rois])]

        cases = [
            ("box_counts", (features, boxes, counts), None),
            ("float64 rows", (features, rows), None),
            (
                "unknown width",
                (features, rows),
                [spec, tf.TensorSpec([None, None], tf.float64)],
            ),
        ]
        for label, args, signature in cases:
            expected = tf.nest.flatten(forward_and_gradient(*args))
            for jit in (False, True):
                fn = tf.function(
                    forward_and_gradient, input_signature=signature, jit_compile=jit
                )
                with self.subTest(label, jit=jit):
                    got = tf.nest.flatten(fn(*args))
                    for g, e in zip(got, expected):
                        self.assertEqual(g.dtype, e.dtype)
                        self.assertAllClose(g, e, rtol=1e-12, atol=1e-12)
        self.assertAllEqual(expected[0][0, 2:], tf.zeros_like(expected[0][0, 2:]))

    def test_jit_compiles_once_for_all_boxes(self):
        # DynamicStitch compiles only with its indices as constants, which
        # would make the boxes compile-time constants: a program per batch.
        features = [tf.constant(f) for f in _pyramid(batch=2)]
        fn = tf.function(
            lambda levels, rois: tfco.multi_scale_roi_align(
                levels, rois, 2, spatial_scales=[1 / s for s in _STRIDES]
            ),
            jit_compile=True,
        )
        programs = {
            fn.experimental_get_compiler_ir(features, tf.constant(_boxes(seed=s)))(
                stage="hlo"
            )
            for s in (1, 2)
        }
        self.assertLen(programs, 1)

    def test_pyramid_batch_sizes_must_agree(self):
        features = _pyramid(batch=2)
        features[1] = features[1][:1]
        rows = _rows(_boxes(count=3))
        with self.assertRaisesRegex(
            ValueError,
            r"features must share one batch size, got features\[0\] 2, "
            r"features\[1\] 1, features\[2\] 2, features\[3\] 2",
        ):
            tfco.multi_scale_roi_align(features, rows, 2, image_size=_IMAGE_SIZE)
        spec = tf.TensorSpec([None, None, None, 3], tf.float64)
        for jit in (False, True):
            fn = tf.function(
                lambda levels: tfco.multi_scale_roi_align(
                    levels, rows, 2, spatial_scales=[1 / s for s in _STRIDES]
                ),
                input_signature=[[spec] * 4],
                jit_compile=jit,
            )
            with self.subTest(jit=jit):
                with self.assertRaisesRegex(
                    tf.errors.InvalidArgumentError,
                    "features must share one batch size",
                ):
                    fn(features)

    def test_rows_of_another_width_are_rejected(self):
        features = _pyramid()
        fn = tf.function(
            lambda rois: tfco.multi_scale_roi_align(
                features, rois, 2, image_size=_IMAGE_SIZE
            ),
            input_signature=[tf.TensorSpec([None, None], tf.float32)],
        )
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"rois must have shape \[K, 5\] or \[N, K, 4\]",
        ):
            fn(_rows(_boxes(count=3))[:, 1:])

    def test_layer_matches_function(self):
        features = _pyramid("NCHW")
        boxes = _boxes()
        layer = tfco.layers.MultiScaleRoIAlign(
            (2, 3),
            image_size=_IMAGE_SIZE,
            sampling_ratio=2,
            data_format="channels_first",
            dtype="float64",
        )
        expected = tfco.multi_scale_roi_align(
            features,
            boxes,
            (2, 3),
            image_size=_IMAGE_SIZE,
            sampling_ratio=2,
            data_format="NCHW",
        )
        self.assertAllEqual(layer([features, boxes]), expected)

    def test_argument_errors(self):
        features = _pyramid()
        boxes = _rows(_boxes(count=2))
        cases = [
            (dict(features=features[0]), TypeError, "features must be a list of"),
            (dict(features=[]), ValueError, "at least one feature map"),
            (
                dict(features=[features[0], tf.cast(features[1], tf.float32)]),
                TypeError,
                "features must share one dtype",
            ),
            (
                dict(features=[features[0], features[1][..., :2]]),
                ValueError,
                r"share one channel count, got \[2, 3\]",
            ),
            (dict(image_size=None), ValueError, "needs spatial_scales, or image_size"),
            (
                dict(image_size=None, spatial_scales=[0.25, 0.125]),
                ValueError,
                r"one scale per feature map \(4\), got 2",
            ),
            (
                dict(image_size=None, spatial_scales=[1 / 4, 1 / 8, 1 / 16, 1 / 64]),
                ValueError,
                "powers of two, each half the one before",
            ),
            (
                dict(image_size=None, spatial_scales=[0.3, 0.15, 0.075, 0.0375]),
                ValueError,
                "powers of two",
            ),
            (dict(image_size=None, spatial_scales=0.25), TypeError, "list of numbers"),
            (dict(image_size=(256, 0)), ValueError, "image_size must be positive"),
            (dict(image_size=256.0), TypeError, "image_size must be an int or a pair"),
        ]
        for override, error, message in cases:
            kwargs = dict(
                features=features, rois=boxes, output_size=2, image_size=_IMAGE_SIZE
            )
            kwargs.update(override)
            with self.subTest(override=list(override)):
                with self.assertRaisesRegex(error, message):
                    tfco.multi_scale_roi_align(**kwargs)

        @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3])] * 2)
        def unknown_heights(fine, coarse):
            return tfco.multi_scale_roi_align(
                [fine, coarse], boxes, 2, image_size=_IMAGE_SIZE
            )

        with self.assertRaisesRegex(ValueError, r"features\[0\] has an unknown height"):
            unknown_heights.get_concrete_function()

    @parameterized.parameters((7, 2, 224, 4), ((3, 5), -1, 224, 4), (7, 2, 64, 3))
    def test_torchvision_parity(
        self, output_size, sampling_ratio, canonical_scale, canonical_level
    ):
        if _SKIP_REASON:
            self.skipTest(_SKIP_REASON)
        features = _pyramid("NCHW")
        boxes = _boxes()
        names = [str(i) for i in range(len(features))]
        pooler = torchvision.ops.MultiScaleRoIAlign(
            names,
            output_size,
            sampling_ratio,
            canonical_scale=canonical_scale,
            canonical_level=canonical_level,
        )
        torch_features = [
            torch.tensor(f, dtype=torch.float32, requires_grad=True) for f in features
        ]
        expected = pooler(
            dict(zip(names, torch_features)),
            [torch.tensor(b) for b in boxes],
            [_IMAGE_SIZE] * len(boxes),
        )
        upstream = np.random.default_rng(2).standard_normal(expected.shape)
        (expected * torch.tensor(upstream, dtype=torch.float32)).sum().backward()

        tf_features = [tf.constant(f, tf.float32) for f in features]
        with tf.GradientTape() as tape:
            tape.watch(tf_features)
            got = tfco.multi_scale_roi_align(
                tf_features,
                boxes,
                output_size,
                image_size=_IMAGE_SIZE,
                sampling_ratio=sampling_ratio,
                canonical_scale=canonical_scale,
                canonical_level=canonical_level,
                data_format="NCHW",
            )
            got = tf.reshape(got, expected.shape)
            loss = tf.reduce_sum(got * tf.constant(upstream, tf.float32))
        grads = tape.gradient(loss, tf_features)
        self.assertAllClose(got, expected.detach().numpy(), rtol=1e-6, atol=1e-6)
        for grad, torch_feature in zip(grads, torch_features):
            self.assertAllClose(grad, torch_feature.grad.numpy(), rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    tf.test.main()
