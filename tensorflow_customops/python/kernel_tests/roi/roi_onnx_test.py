"""RoiAlign and RoiPool exported to ONNX (RoiAlign-16, MaxRoiPool) and run in
ONNX Runtime: equal to the kernels, bit for bit."""

import itertools

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.onnx import export
from tensorflow_customops.python.onnx.errors import ExportError
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import boxes as registry_boxes

_ops = load_library.load_op_library()


def _signature(dtype=tf.float32, boxes_dtype=tf.float32):
    """Features and rows of dynamic sizes."""
    return [tf.TensorSpec([None] * 4, dtype), tf.TensorSpec([None, 5], boxes_dtype)]


_SIGNATURE = _signature()


def _rows(rng, count, batch, height, width, scale, dtype=np.float32):
    """`count` `[K, 5]` rows on a `height` x `width` map at `scale`: corners
    on multiples of 0.5 once scaled (where RoiPool rounds, half away from
    zero, and RoiAlign's bins split), some inverted, some partly or wholly
    off the map; sub-pixel boxes; and the registry's edge cases."""
    half = rng.integers(-8, 2 * max(height, width) + 8, (count, 4)) / 2
    sub_pixel = rng.uniform(-1, max(height, width) + 1, (count // 2, 2))
    sub_pixel = np.concatenate(
        [sub_pixel, sub_pixel + rng.uniform(0, 1, sub_pixel.shape)], 1
    )
    corners = np.concatenate([half, sub_pixel]) / scale
    images = rng.integers(0, batch, (len(corners), 1))
    rows = np.concatenate([images, corners], 1)
    edges = registry_boxes.edge_cases(rng, batch, height, width, scale)
    return np.concatenate([rows, edges]).astype(dtype)


def _features(rng, shape, data_format, dtype=np.float32):
    features = rng.standard_normal(shape).astype(dtype)
    return features.transpose(0, 3, 1, 2).copy() if data_format == "NCHW" else features


def _roi_align(**attrs):
    @tf.function
    def fn(features, rois):
        return _ops.custom_ops_roi_align(features, rois, **attrs)

    return fn


def _roi_pool(**attrs):
    @tf.function
    def fn(features, rois):
        return _ops.custom_ops_roi_pool(features, rois, **attrs)[0]

    return fn


class RoiOnnxTest(parameterized.TestCase, tf.test.TestCase):
    def assert_exact(self, fn, inputs, signature=_SIGNATURE, **export_kwargs):
        expected, got, model = onnx_test_util.export_and_run(
            fn, signature, inputs, **export_kwargs
        )
        self.assertEqual(expected[0].dtype, got[0].dtype)
        np.testing.assert_array_equal(got[0], expected[0])
        return model

    @parameterized.parameters(
        itertools.product(["NHWC", "NCHW"], [False, True], [0, 2], [0.5, 0.3])
    )
    def test_roi_align_exact(self, data_format, aligned, sampling_ratio, scale):
        rng = np.random.default_rng(
            [data_format == "NCHW", aligned, sampling_ratio + 1, int(scale * 10)]
        )
        features = _features(rng, (2, 9, 13, 3), data_format)
        rows = _rows(rng, 60, 2, 9, 13, scale)
        fn = _roi_align(
            pooled_height=3,
            pooled_width=2,
            spatial_scale=scale,
            sampling_ratio=sampling_ratio,
            aligned=aligned,
            data_format=data_format,
        )
        self.assert_exact(fn, [features, rows])

    @parameterized.parameters(itertools.product(["NHWC", "NCHW"], [False, True]))
    def test_roi_align_non_finite_features(self, data_format, aligned):
        # NaN and inf reach the same bins, weighted the same, in both; but
        # ORT reads pixel (0, 0) with weight 0 for a sample off the map, so a
        # NaN or inf there would make NaN of bins the kernels average.
        rng = np.random.default_rng([data_format == "NCHW", aligned])
        features = _features(rng, (2, 9, 13, 3), data_format)
        features.reshape(-1)[rng.integers(0, features.size, 20)] = np.nan
        features.reshape(-1)[rng.integers(0, features.size, 20)] = np.inf
        if data_format == "NHWC":
            features[:, 0, 0, :] = 1.0
        else:
            features[:, :, 0, 0] = 1.0
        rows = _rows(rng, 80, 2, 9, 13, 0.5)
        for sampling_ratio in (-1, 2):
            fn = _roi_align(
                pooled_height=3,
                pooled_width=2,
                spatial_scale=0.5,
                sampling_ratio=sampling_ratio,
                aligned=aligned,
                data_format=data_format,
            )
            self.assert_exact(fn, [features, rows])

    @parameterized.parameters(itertools.product(["NHWC", "NCHW"], [1.0, 0.5, 0.3]))
    def test_roi_pool_exact(self, data_format, scale):
        rng = np.random.default_rng(7)
        features = _features(rng, (2, 9, 13, 3), data_format)
        # NaNs, which the kernels skip, and -inf, which never beats the
        # running maximum's start, -FLT_MAX.
        features.reshape(-1)[rng.integers(0, features.size, 40)] = np.nan
        features.reshape(-1)[rng.integers(0, features.size, 10)] = -np.inf
        rows = _rows(rng, 80, 2, 9, 13, scale)
        fn = _roi_pool(
            pooled_height=3,
            pooled_width=4,
            spatial_scale=scale,
            data_format=data_format,
        )
        self.assert_exact(fn, [features, rows])

    @parameterized.parameters(["NHWC", "NCHW"])
    def test_dynamic_batch_and_boxes(self, data_format):
        rng = np.random.default_rng(3)
        for fn in (
            _roi_align(pooled_height=2, pooled_width=2, data_format=data_format),
            _roi_pool(pooled_height=2, pooled_width=2, data_format=data_format),
        ):
            model = export.export(fn, _SIGNATURE)
            for batch, height, width, count in [
                (1, 5, 6, 3),
                (3, 8, 4, 40),
                (2, 4, 4, 0),
            ]:
                features = _features(rng, (batch, height, width, 2), data_format)
                rows = _rows(rng, count, batch, height, width, 1.0)[:count]
                np.testing.assert_array_equal(
                    onnx_test_util.run(model, [features, rows])[0], fn(features, rows)
                )

    @parameterized.parameters("roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool")
    def test_empty_maps_and_batches(self, name):
        # Zeros, as the kernels give: ONNX Runtime's RoiAlign crashed on a map
        # without rows or columns, and the position-sensitive compositions'
        # reshapes failed on it.
        fn = tf.function(
            lambda features, rois: (
                getattr(tfco, name)(features, rois, 2, sampling_ratio=2)
                if name.endswith("align")
                else getattr(tfco, name)(features, rois, 2)
            )
        )
        model = export.export(fn, _SIGNATURE)
        rows = np.array([[0, 1, 1, 4, 4], [0, -2, -2, 0.5, 0.5]], np.float32)
        for batch, height, width, count in [
            (1, 0, 6, 2),
            (1, 5, 0, 1),
            (0, 5, 6, 0),
            (1, 5, 6, 0),
        ]:
            with self.subTest(shape=(batch, height, width), boxes=count):
                features = np.ones((batch, height, width, 8), np.float32)
                expected = fn(features, rows[:count])
                got = onnx_test_util.run(model, [features, rows[:count]])[0]
                self.assertEqual(got.shape, tuple(expected.shape))
                np.testing.assert_array_equal(got, expected)

    def test_per_image_boxes_without_counts_and_none(self):
        # ONNX's Reshape keeps the input's size for a 0 in its shape, unless
        # allowzero: [N, K, 4] boxes with K = 0.
        fn = tf.function(lambda features, boxes: tfco.roi_align(features, boxes, 2))
        model = export.export(
            fn,
            [tf.TensorSpec([None] * 4), tf.TensorSpec([None, None, 4])],
        )
        rng = np.random.default_rng(8)
        features = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
        for count in (3, 0):
            boxes = np.tile(np.array([1, 1, 4, 5], np.float32), (2, count, 1))
            with self.subTest(boxes=count):
                got = onnx_test_util.run(model, [features, boxes])[0]
                self.assertEqual(got.shape, (2, count, 2, 2, 3))
                np.testing.assert_array_equal(got, fn(features, boxes))

    @parameterized.parameters(
        (np.float64, np.float64), (np.float64, np.float32), (np.float16, np.float32)
    )
    def test_roi_align_dtypes(self, dtype, boxes_dtype):
        rng = np.random.default_rng(5)
        features = _features(rng, (2, 7, 6, 2), "NHWC", dtype)
        rows = _rows(rng, 40, 2, 7, 6, 0.5, boxes_dtype)
        if boxes_dtype == np.float64:
            # Coordinates float32 cannot hold.
            rows[:, 1:] += rng.uniform(-1e-4, 1e-4, rows[:, 1:].shape)
        signature = _signature(dtype, boxes_dtype)
        for aligned in (False, True):
            fn = _roi_align(
                pooled_height=2, pooled_width=3, spatial_scale=0.5, aligned=aligned
            )
            self.assert_exact(fn, [features, rows], signature)

    @parameterized.parameters("NHWC", "NCHW")
    def test_bfloat16(self, data_format):
        # Computed in float and rounded once, as half; the result is read as
        # float (exact), as ONNX Runtime returns no bfloat16 arrays.
        rng = np.random.default_rng(11)
        features = _features(rng, (2, 7, 6, 2), data_format)
        features = tf.cast(features, tf.bfloat16).numpy()
        rows = _rows(rng, 40, 2, 7, 6, 0.5)
        for op in (_ops.custom_ops_roi_align, _ops.custom_ops_roi_pool):

            @tf.function
            def fn(features, rois, op=op):
                pooled = op(
                    features,
                    rois,
                    pooled_height=2,
                    pooled_width=3,
                    spatial_scale=0.5,
                    data_format=data_format,
                )
                if op is _ops.custom_ops_roi_pool:
                    pooled = pooled[0]
                return tf.cast(pooled, tf.float32)

            self.assert_exact(fn, [features, rows], _signature(tf.bfloat16))

    def test_half_result_cast_to_float(self):
        rng = np.random.default_rng(10)
        features = _features(rng, (2, 7, 6, 2), "NHWC")
        rows = _rows(rng, 40, 2, 7, 6, 0.5)
        for op in (_ops.custom_ops_roi_align, _ops.custom_ops_roi_pool):

            @tf.function
            def fn(features, rois, op=op):
                pooled = op(
                    tf.cast(features, tf.float16),
                    rois,
                    pooled_height=2,
                    pooled_width=3,
                    spatial_scale=0.5,
                )
                if op is _ops.custom_ops_roi_pool:
                    pooled = pooled[0]
                return tf.cast(pooled, tf.float32)

            self.assert_exact(fn, [features, rows])

    def test_roi_pool_half(self):
        rng = np.random.default_rng(8)
        features = _features(rng, (2, 7, 6, 2), "NCHW", np.float16)
        rows = _rows(rng, 40, 2, 7, 6, 0.5)
        fn = _roi_pool(
            pooled_height=2, pooled_width=3, spatial_scale=0.5, data_format="NCHW"
        )
        self.assert_exact(fn, [features, rows], _signature(tf.float16))

    def test_roi_pool_refuses_float64(self):
        fn = _roi_pool(pooled_height=2, pooled_width=2)
        signature = _signature(tf.float64, tf.float64)
        with self.assertRaisesRegex(
            ExportError, r"RoiPool .*MaxRoiPool computes in float only.*got double"
        ):
            export.export(fn, signature)

    def test_roi_pool_refuses_argmax(self):
        @tf.function
        def fn(features, rois):
            return _ops.custom_ops_roi_pool(
                features, rois, pooled_height=2, pooled_width=2
            )

        with self.assertRaisesRegex(ExportError, "argmax has no ONNX counterpart"):
            export.export(fn, _SIGNATURE)

    def test_roi_align_sampling_ratio_above_64_never_reaches_the_handler(self):
        # The op's shape function refuses it when the function is traced, so
        # no graph to export can hold it.
        fn = _roi_align(pooled_height=2, pooled_width=2, sampling_ratio=65)
        with self.assertRaisesRegex(
            ValueError, "sampling_ratio must be at most 64 .*got 65"
        ):
            export.export(fn, _SIGNATURE)

    @parameterized.parameters(
        ("index 0.9", [0.9, 0, 0, 2, 2]),
        ("index above 1 by an ulp", [np.float32(1.0000001), 0, 0, 2, 2]),
        ("index -1", [-1, 0, 0, 2, 2]),
        ("index 2", [2, 0, 0, 2, 2]),
        ("NaN index", [np.nan, 0, 0, 2, 2]),
        ("NaN box", [0, 0, np.nan, 2, 2]),
        ("infinite box", [1, 0, 0, np.inf, 2]),
        ("box beyond 2^30 pixels once scaled", [1, 0, 0, 2.0**31 + 2**8, 2]),
    )
    def test_rows_the_kernels_refuse_fail_in_ort(self, why, bad_row):
        del why
        features = np.ones((2, 4, 4, 1), np.float32)
        rows = np.array([[1, 0, 0, 3, 3], bad_row], np.float32)
        for fn, message in (
            (
                _roi_align(pooled_height=2, pooled_width=2, spatial_scale=0.5),
                "out of range",
            ),
            (
                _roi_pool(pooled_height=2, pooled_width=2, spatial_scale=0.5),
                "roi_batch_id",
            ),
        ):
            model = export.export(fn, _SIGNATURE)
            with self.assertRaises(tf.errors.InvalidArgumentError):
                fn(features, rows)
            with self.assertRaisesRegex(Exception, message):
                onnx_test_util.run(model, [features, rows])
            np.testing.assert_array_equal(
                onnx_test_util.run(model, [features, rows[:1]])[0],
                fn(features, rows[:1]),
            )

    def test_roi_pool_refuses_boxes_spanning_2_to_the_31_pixels(self):
        # The kernels pool them; MaxRoiPool would overflow its int32 counts.
        features = np.ones((1, 4, 4, 1), np.float32)
        fn = _roi_pool(pooled_height=2, pooled_width=2)
        model = export.export(fn, _SIGNATURE)
        wide = np.array([[0, -(2.0**30), 1, 2.0**30, 3]], np.float32)
        self.assertEqual(fn(features, wide).shape, (1, 2, 2, 1))
        with self.assertRaisesRegex(Exception, "roi_batch_id"):
            onnx_test_util.run(model, [features, wide])
        # A box half as wide is pooled by both.
        narrower = np.array([[0, -(2.0**29), 1, 2.0**30, 3]], np.float32)
        np.testing.assert_array_equal(
            onnx_test_util.run(model, [features, narrower])[0], fn(features, narrower)
        )

    def test_tensorrt(self):
        fn = _roi_align(pooled_height=2, pooled_width=2, sampling_ratio=-1)
        model = export.export(fn, _SIGNATURE, target="tensorrt")
        (roi_align,) = [n for n in model.graph.node if n.op_type == "RoiAlign"]
        attrs = {a.name: a for a in roi_align.attribute}
        # TensorRT's parser would default an absent sampling_ratio to 1.
        self.assertEqual(attrs["sampling_ratio"].i, 0)
        # No checks of the rows: TensorRT cannot raise.
        self.assertNotIn("Where", {n.op_type for n in model.graph.node})
        # What TensorRT gets runs in ORT too, exact on rows the kernels take.
        rng = np.random.default_rng(9)
        self.assert_exact(
            _roi_align(
                pooled_height=2, pooled_width=3, spatial_scale=0.5, aligned=True
            ),
            [_features(rng, (2, 7, 6, 2), "NHWC"), _rows(rng, 40, 2, 7, 6, 0.5)],
            target="tensorrt",
        )
        with self.assertRaisesRegex(ExportError, "TensorRT computes double as float"):
            export.export(fn, _signature(tf.float64, tf.float64), target="tensorrt")
        with self.assertRaisesRegex(
            ExportError, "TensorRT's ONNX parser takes no MaxRoiPool"
        ):
            export.export(
                _roi_pool(pooled_height=2, pooled_width=2),
                _SIGNATURE,
                target="tensorrt",
            )


if __name__ == "__main__":
    tf.test.main()
