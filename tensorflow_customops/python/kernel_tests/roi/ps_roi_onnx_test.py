"""ONNX export of PsRoiPool and PsRoiAlign, run in ONNX Runtime against the
TensorFlow kernels: PsRoiPool exactly; PsRoiAlign within the tolerance its
composition states (handlers/ps_roi.py)."""

import numpy as np
import onnxruntime as ort
import tensorflow as tf

from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.onnx import export
from tensorflow_customops.python.onnx.errors import ExportError
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import boxes as registry_boxes

_ops = load_library.load_op_library()

# Op types the composition may write for TensorRT: all in TensorRT's ONNX
# operator support matrix (its documentation; not run here).
_TENSORRT_OPS = {
    "Abs", "Add", "And", "Cast", "Ceil", "Concat", "Constant", "Div", "Equal",
    "Expand", "Floor", "Gather", "GatherElements", "Greater", "GreaterOrEqual",
    "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "NonZero",
    "Or", "ReduceMax", "ReduceMin", "ReduceProd", "Reshape", "RoiAlign",
    "ScatterND", "Shape", "Sign", "Slice", "Squeeze", "Sub", "Transpose",
    "Unsqueeze", "Where",
}  # fmt: skip

_EPSILON = {np.float32: 2.0**-23, np.float64: 2.0**-52}


def _boxes(rng, batch, height, width, scale, dtype):
    """Boxes [K, 5] of every kind: random over and around the map, corners on
    .5 after scaling, sub-pixel, bins a unit in the last place from whole
    pixels (where the adaptive grid steps), reversed (x2 < x1, y2 < y1 or
    both), and the registry's edge cases (partly and wholly off the map,
    tiny, degenerate, the whole map)."""
    count = 60

    def rows(corners, ordered=True):
        if ordered:
            corners = np.concatenate(
                [
                    np.minimum(corners[:, :2], corners[:, 2:]),
                    np.maximum(corners[:, :2], corners[:, 2:]),
                ],
                1,
            )
        return np.concatenate([rng.integers(0, batch, (len(corners), 1)), corners], 1)

    size = np.array([width, height, width, height])
    uniform = rng.uniform(-0.3, 1.3, (count, 4)) * size / scale
    halves = (rng.integers(-3, size + 3, (count, 4)) + 0.5) / scale
    start = rng.uniform(-1, 1, (count, 2)) * size[:2]
    sub_pixel = np.concatenate([start, start + rng.uniform(0, 1, (count, 2))], 1)
    # Bins of 1 or 2 pixels, give or take a few units in the last place.
    wobble = 1 + rng.integers(-3, 4, (count, 2)) * 2.0**-23
    extent = rng.integers(1, 3, (count, 2)) * 3 * wobble
    start = rng.uniform(0, 1, (count, 2)) * size[:2]
    whole_pixels = np.concatenate([start, start + extent], 1)
    # Half a pixel thin on one axis, on .5 across the map on the other.
    thin = halves.copy()
    thin[: count // 2, 2] = thin[: count // 2, 0] + 0.5 / scale
    thin[count // 2 :, 3] = thin[count // 2 :, 1] + 0.5 / scale
    # Half a pixel wide, from 2 above the map's bottom edge to 2 below it
    # (after aligned's shift, or without it): with 7 bins, a sample of bin 3
    # lies on the edge.
    column = rng.integers(0, width, (count // 4, 1)) + 0.5
    top = np.where(rng.integers(0, 2, column.shape), height - 2, height - 1.5)
    edge = np.concatenate([column, top, column + 0.5, top + 4], 1)
    # Reversed: PsRoiAlign's adaptive grid gives their bins no samples (0),
    # a fixed one samples them backwards; PsRoiPool takes them 1 pixel long.
    reversed_ = rows(uniform)
    third = count // 3
    reversed_[:third, [1, 3]] = reversed_[:third, [3, 1]]
    reversed_[third : 2 * third, [2, 4]] = reversed_[third : 2 * third, [4, 2]]
    reversed_[2 * third :, 1:] = reversed_[2 * third :, [3, 4, 1, 2]]
    # The edge boxes reversed along x by 9 pixels or more (an adaptive grid
    # of -3 or less with 3 bins), their y samples still on the edge.
    reversed_edge = edge.copy()
    reversed_edge[:, 2] = edge[:, 0] - rng.uniform(9, 20, len(edge))
    parts = [
        rows(uniform),
        reversed_,
        rows(reversed_edge / scale, ordered=False),
        rows(halves),
        rows(thin),
        rows(edge / scale),
        rows(sub_pixel / scale),
        rows(whole_pixels / scale),
        registry_boxes.edge_cases(rng, batch, height, width, scale),
    ]
    return np.concatenate(parts).astype(dtype)


def _features(rng, shape, nchw, dtype):
    n, h, w, c = shape
    return rng.uniform(-4, 4, (n, c, h, w) if nchw else shape).astype(dtype)


class PsRoiOnnxTest(tf.test.TestCase):
    def _export(self, op, features, rois, **attrs):
        """The tf.function of the raw op with dynamic batch and box count,
        and its ONNX model."""
        signature = [
            tf.TensorSpec([None, *features.shape[1:]], features.dtype),
            tf.TensorSpec([None, 5], rois.dtype),
        ]
        fn = tf.function(lambda x, r: op(x, r, **attrs), input_signature=signature)
        return fn, export.export(fn, signature)

    def _compare(self, op, shape, nchw, dtype, boxes_dtype, check, **attrs):
        """Exports `op` once and checks ONNX Runtime against TensorFlow with
        `check(tf, ort, features, rois)` on inputs of two batch sizes and box
        counts, and on no boxes."""
        rng = np.random.default_rng(len(attrs) + shape[0])
        scale = attrs["spatial_scale"]
        features = _features(rng, shape, nchw, dtype)
        rois = _boxes(rng, shape[0], shape[1], shape[2], scale, boxes_dtype)
        data_format = "NCHW" if nchw else "NHWC"
        fn, model = self._export(op, features, rois, data_format=data_format, **attrs)
        session = onnx_test_util.session(model)
        names = [i.name for i in session.get_inputs()]
        small = _features(rng, (1, *shape[1:]), nchw, dtype)
        for x, r in [
            (features, rois),
            (small, rois[:3] * np.array([0, 1, 1, 1, 1], boxes_dtype)),
            (features, rois[:0]),
        ]:
            expected = fn(x, r).numpy()
            got = session.run(None, dict(zip(names, [x, r])))[0]
            self.assertEqual(got.shape, expected.shape)
            self.assertEqual(got.dtype, expected.dtype)
            check(expected, got, x, r)
        return model

    def testPsRoiPoolIsExact(self):
        def exact(expected, got, features, rois):
            del features, rois
            np.testing.assert_array_equal(got, expected)

        for nchw, dtype, boxes_dtype, shape, bins in [
            (False, np.float32, np.float32, (2, 11, 13, 3 * 4 * 2), (4, 2)),
            (True, np.float32, np.float32, (3, 9, 14, 2 * 3 * 3), (3, 3)),
            (False, np.float64, np.float32, (2, 10, 7, 7 * 7), (7, 7)),
            (True, np.float64, np.float64, (2, 12, 12, 2 * 2 * 2), (2, 2)),
        ]:
            with self.subTest(nchw=nchw, dtype=dtype, bins=bins):
                self._compare(
                    _ops.custom_ops_ps_roi_pool,
                    shape,
                    nchw,
                    dtype,
                    boxes_dtype,
                    exact,
                    pooled_height=bins[0],
                    pooled_width=bins[1],
                    spatial_scale=0.5 if nchw else 0.25,
                )

    def testPsRoiAlignWithinStatedTolerance(self):
        def within_tolerance(dtype, nchw, scale):
            def check(expected, got, features, rois):
                # Sample positions a few units in the last place of the
                # coordinates apart; bilinear weights move by as much, times
                # the features' range.
                spatial = features.shape[2:] if nchw else features.shape[1:3]
                magnitude = max(np.abs(rois[:, 1:]).max(initial=0) * scale, *spatial)
                bound = 32 * _EPSILON[dtype] * magnitude * np.abs(features).max()
                np.testing.assert_allclose(got, expected, rtol=0, atol=bound)

            return check

        for nchw, dtype, boxes_dtype, sampling_ratio, aligned, scale in [
            (False, np.float32, np.float32, -1, True, 0.25),
            (True, np.float32, np.float32, -1, False, 0.5),
            (False, np.float32, np.float32, 3, False, 1.0),
            (True, np.float64, np.float64, 2, True, 0.25),
            (False, np.float64, np.float32, 0, False, 0.5),
        ]:
            with self.subTest(
                nchw=nchw, dtype=dtype, sampling_ratio=sampling_ratio, aligned=aligned
            ):
                self._compare(
                    _ops.custom_ops_ps_roi_align,
                    (2, 21, 11, 3 * 7 * 3),
                    nchw,
                    dtype,
                    boxes_dtype,
                    within_tolerance(dtype, nchw, scale),
                    pooled_height=7,
                    pooled_width=3,
                    spatial_scale=scale,
                    sampling_ratio=sampling_ratio,
                    aligned=aligned,
                )

    def testUnknownMapShape(self):
        # Height, width and channels known only at run time: the composition
        # reads them from the features' shape.
        signature = [
            tf.TensorSpec([None, None, None, None], tf.float32),
            tf.TensorSpec([None, 5], tf.float32),
        ]
        rng = np.random.default_rng(6)
        for op in [_ops.custom_ops_ps_roi_pool, _ops.custom_ops_ps_roi_align]:
            fn = tf.function(
                lambda x, r, op=op: op(x, r, pooled_height=2, pooled_width=3),
                input_signature=signature,
            )
            model = export.export(fn, signature)
            for shape in [(1, 5, 9, 6), (2, 12, 7, 18)]:
                with self.subTest(op=op.__name__, shape=shape):
                    features = _features(rng, shape, False, np.float32)
                    rois = _boxes(rng, shape[0], shape[1], shape[2], 1.0, np.float32)
                    got = onnx_test_util.run(model, [features, rois])[0]
                    np.testing.assert_allclose(
                        got, fn(features, rois).numpy(), rtol=0, atol=1e-4
                    )

    def testHalfAndBfloat16ComputeInFloat(self):
        rng = np.random.default_rng(3)
        rois = _boxes(rng, 2, 9, 10, 0.5, np.float32)
        features = _features(rng, (2, 9, 10, 2 * 9), False, np.float32)
        ops = [
            (_ops.custom_ops_ps_roi_pool, {}),
            (_ops.custom_ops_ps_roi_align, {"sampling_ratio": -1}),
        ]
        for dtype, step in [(tf.float16, 2.0**-10), (tf.bfloat16, 2.0**-7)]:
            signature = [
                tf.TensorSpec([None, 9, 10, 2 * 9], dtype),
                tf.TensorSpec([None, 5], tf.float32),
            ]
            narrow = tf.cast(features, dtype).numpy()
            for op, attrs in ops:
                with self.subTest(dtype=dtype.name, op=op.__name__):
                    # Read as float (exact), as ONNX Runtime returns no
                    # bfloat16 arrays.
                    @tf.function(input_signature=signature)
                    def fn(x, r, op=op, attrs=attrs):
                        pooled = op(x, r, pooled_height=3, pooled_width=3, **attrs)
                        return tf.cast(pooled, tf.float32)

                    expected, got, _ = onnx_test_util.export_and_run(
                        fn, signature, [narrow, rois]
                    )
                    if op is _ops.custom_ops_ps_roi_pool:
                        # The same float sums, rounded once.
                        np.testing.assert_array_equal(got[0], expected[0])
                        continue
                    # PsRoiAlign's float results may differ in the last
                    # places (see above), which can move the rounding by one
                    # step.
                    np.testing.assert_allclose(
                        got[0], expected[0], rtol=step, atol=2.0**-24
                    )

    def testRefusedBoxesFailInOnnxRuntime(self):
        # Every row the kernels refuse gets batch index -1, so its sub-boxes'
        # group indices are negative, which ONNX Runtime refuses; the same
        # row after a valid one shows that the failure is the refused row's.
        rng = np.random.default_rng(4)
        features = rng.uniform(size=(2, 6, 6, 8)).astype(np.float32)
        valid = [1, 1, 1, 3, 3]
        for op in [_ops.custom_ops_ps_roi_pool, _ops.custom_ops_ps_roi_align]:
            fn, model = self._export(
                op,
                features,
                np.zeros((1, 5), np.float32),
                pooled_height=2,
                pooled_width=2,
            )
            rois = np.array([valid], np.float32)
            np.testing.assert_array_equal(
                onnx_test_util.run(model, [features, rois])[0],
                fn(features, rois).numpy(),
            )
            for row in [
                [0, 1, 1, np.nan, 3],
                [0, 1, -np.inf, 3, 3],
                [0, 1, 1, 3e9, 3],
                [0.5, 1, 1, 3, 3],
                [2, 1, 1, 3, 3],
                [-1, 1, 1, 3, 3],
            ]:
                with self.subTest(op=op.__name__, row=row):
                    rois = np.array([valid, row], np.float32)
                    with self.assertRaises(tf.errors.InvalidArgumentError):
                        fn(features, rois)
                    with self.assertRaisesRegex(
                        ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                        r"batch_indices value -\d+ at index \d+ is out of range",
                    ):
                        onnx_test_util.run(model, [features, rois])

    def testTensorRtTarget(self):
        for op in [_ops.custom_ops_ps_roi_pool, _ops.custom_ops_ps_roi_align]:
            for dtype in [tf.float64, tf.float32]:
                signature = [
                    tf.TensorSpec([None, 5, 5, 4], dtype),
                    tf.TensorSpec([None, 5], tf.float32),
                ]
                fn = tf.function(
                    lambda x, r, op=op: op(x, r, pooled_height=2, pooled_width=2),
                    input_signature=signature,
                )
                with self.subTest(op=op.__name__, dtype=dtype.name):
                    if dtype == tf.float64:
                        with self.assertRaisesRegex(
                            ExportError, "TensorRT computes double as float"
                        ):
                            export.export(fn, signature, target="tensorrt")
                        continue
                    model = export.export(fn, signature, target="tensorrt")
                    types = {node.op_type for node in model.graph.node}
                    self.assertLessEqual(types, _TENSORRT_OPS)
                    for node in model.graph.node:
                        if node.op_type == "RoiAlign":
                            names = {a.name for a in node.attribute}
                            self.assertIn("sampling_ratio", names)


if __name__ == "__main__":
    tf.test.main()
