"""The ONNX exports of MatrixMul, ZeroOut, ClipByGlobalNorm, CheckNumericsN
and RoiBoxCounts in ONNX Runtime against the kernels: every dtype, shapes
unknown when exported. bfloat16 is fed and read as float32 through casts in
the function (ORT's Python API takes no bfloat16 arrays)."""

import unittest

import numpy as np
import onnx
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.ops import load_library

_OPS = load_library.load_op_library()
_FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _exported(fn, dtype, specs, inputs):
    """Exports fn(*inputs as dtype) and runs it in TensorFlow and ORT; a
    bfloat16 function takes and returns float32."""
    if dtype != tf.bfloat16:
        specs = [
            tf.TensorSpec(s.shape, dtype if s.dtype == "any" else s.dtype)
            for s in specs
        ]
        inputs = [np.asarray(x, dtype.as_numpy_dtype) for x in inputs]
        return onnx_test_util.export_and_run(tf.function(fn), specs, inputs)[:2]

    def wide(*args):
        args = [tf.cast(a, tf.bfloat16) if a.dtype == tf.float32 else a for a in args]
        out = fn(*args)
        out = out if isinstance(out, (list, tuple)) else [out]
        return [tf.cast(o, tf.float32) if o.dtype == tf.bfloat16 else o for o in out]

    specs = [
        tf.TensorSpec(s.shape, tf.float32 if s.dtype == "any" else s.dtype)
        for s in specs
    ]
    inputs = [np.asarray(tf.cast(tf.cast(x, tf.bfloat16), tf.float32)) for x in inputs]
    return onnx_test_util.export_and_run(tf.function(wide), specs, inputs)[:2]


class _Any:
    """A TensorSpec whose dtype is the case's."""

    def __init__(self, shape):
        self.shape = shape
        self.dtype = "any"


class MatrixMulTest(unittest.TestCase):
    def test_every_dtype_and_transpose(self):
        rng = np.random.default_rng(0)
        for dtype in _FLOATS:
            for ta in (False, True):
                for tb in (False, True):
                    a = rng.standard_normal((7, 5) if ta else (5, 7))
                    b = rng.standard_normal((3, 7) if tb else (7, 3))
                    expected, got = _exported(
                        lambda x, y, ta=ta, tb=tb: tfco.matrix_mul(
                            x, y, transpose_a=ta, transpose_b=tb
                        ),
                        dtype,
                        [_Any([None, None]), _Any([None, None])],
                        [a, b],
                    )
                    # Float (or double) sums in another order: within 1e-6
                    # (1e-15) of |a| |b| k; half and bfloat16, rounded once
                    # from float, within that and one unit in their last place.
                    scale = np.abs(a).max() * np.abs(b).max() * 7
                    tol = 1e-15 if dtype == tf.float64 else 1e-6
                    e = expected[0].astype(np.float64)
                    diff = np.abs(got[0].astype(np.float64) - e)
                    ulp = (
                        np.abs(e) * 2.0**-7
                        if dtype == tf.bfloat16
                        else np.spacing(np.abs(expected[0]))
                    )
                    self.assertTrue(
                        np.all(diff <= tol * scale + ulp),
                        (dtype.name, ta, tb, diff.max()),
                    )

    def test_exact_where_sums_are(self):
        # Small integers: every partial sum exact, in any order.
        rng = np.random.default_rng(1)
        a = rng.integers(-8, 8, (9, 40)).astype(np.float32)
        b = rng.integers(-8, 8, (40, 11)).astype(np.float32)
        expected, got = _exported(
            lambda x, y: tfco.matrix_mul(x, y),
            tf.float32,
            [_Any([None, 40]), _Any([40, None])],
            [a, b],
        )
        np.testing.assert_array_equal(got[0], expected[0])

    def test_empty(self):
        expected, got = _exported(
            lambda x, y: tfco.matrix_mul(x, y),
            tf.float32,
            [_Any([None, None]), _Any([None, None])],
            [np.zeros((0, 4)), np.zeros((4, 3))],
        )
        self.assertEqual(got[0].shape, (0, 3))


class ZeroOutTest(unittest.TestCase):
    def test_every_dtype(self):
        # One model per dtype, run on several shapes of its rank.
        rng = np.random.default_rng(2)
        for dtype in _FLOATS + (tf.int8, tf.uint8, tf.int32, tf.int64):
            wide = tf.float32 if dtype == tf.bfloat16 else dtype
            fn = tf.function(
                lambda t, dtype=dtype: tf.cast(
                    tfco.zero_out(tf.cast(t, dtype), keep=5), t.dtype
                )
            )
            model = tfco.onnx.export(fn, [tf.TensorSpec([None, None, None], wide)])
            for shape in ([2, 3, 4], [0, 3, 2], [1, 1, 3], [5, 1, 1]):
                x = rng.integers(1, 100, shape).astype(wide.as_numpy_dtype)
                np.testing.assert_array_equal(
                    onnx_test_util.run(model, [x])[0], fn(x), f"{dtype.name} {shape}"
                )

    def test_every_rank_and_keep(self):
        rng = np.random.default_rng(3)
        for shape in ([], [7], [2, 3, 4]):
            x = rng.integers(1, 100, shape).astype(np.int32)
            for keep in (0, 1, 5, 24, 100):
                expected, got = _exported(
                    lambda t, keep=keep: tfco.zero_out(t, keep=keep),
                    tf.int32,
                    [_Any([None] * len(shape))],
                    [x],
                )
                np.testing.assert_array_equal(got[0], expected[0], f"{shape} {keep}")

    def test_nan_and_inf_are_kept_or_zeroed(self):
        x = np.array([np.nan, np.inf, np.nan, -np.inf], np.float32)
        expected, got = _exported(
            lambda t: tfco.zero_out(t, keep=2), tf.float32, [_Any([None])], [x]
        )
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[0], [np.nan, np.inf, 0, 0])

    def test_negative_keep_is_refused(self):
        fn = tf.function(lambda t: _OPS.custom_ops_zero_out(to_zero=t, keep=-2))
        with self.assertRaisesRegex(tfco.onnx.ExportError, "keep must be >= 0, got -2"):
            tfco.onnx.export(fn, [tf.TensorSpec([None], tf.int32)])


class ClipByGlobalNormTest(unittest.TestCase):
    def _check(self, dtype, tensors, clip_norm):
        specs = [_Any([None] * np.ndim(t)) for t in tensors] + [_Any([])]

        def fn(*args):
            clipped, norm = tfco.clip_by_global_norm(list(args[:-1]), args[-1])
            return [*clipped, norm]

        expected, got = _exported(fn, dtype, specs, [*tensors, clip_norm])
        for e, g in zip(expected, got):
            # The squares are summed in double in another order: a float64
            # norm and scale differ by a few units in the last place (4 seen
            # in 200 random cases); rounded to a narrower dtype they are
            # equal but for a sum at a rounding tie, one unit.
            e, g = e.astype(np.float64), g.astype(np.float64)
            with np.errstate(invalid="ignore"):
                if dtype == tf.bfloat16:
                    ulp = np.abs(e) * 2.0**-7
                else:
                    ulp = np.spacing(np.abs(e).astype(dtype.as_numpy_dtype))
                close = (
                    (e == g)
                    | (np.isnan(e) & np.isnan(g))
                    | (np.abs(e - g) <= (8 if dtype == tf.float64 else 1) * ulp)
                )
            self.assertTrue(np.all(close), (dtype.name, e, g))
        return expected, got

    def test_every_dtype(self):
        rng = np.random.default_rng(3)
        for dtype in _FLOATS:
            for clip_norm in (0.5, 4.0, 100.0):
                tensors = [
                    rng.standard_normal((3, 4)),
                    rng.standard_normal(5),
                    np.array(rng.standard_normal()),
                    np.zeros((0, 2)),
                ]
                self._check(dtype, tensors, clip_norm)
                self._check(dtype, tensors[:1], clip_norm)

    def test_bit_for_bit_in_float32(self):
        rng = np.random.default_rng(4)
        tensors = [rng.standard_normal((64, 33)), rng.standard_normal(1000)]
        expected, got = self._check(tf.float32, tensors, 3.0)
        for e, g in zip(expected, got):
            np.testing.assert_array_equal(g, e)

    def test_zero_inf_and_nan(self):
        for dtype in _FLOATS:
            # A zero norm leaves the tensors as they are.
            _, got = self._check(dtype, [np.zeros(3), np.zeros((2, 2))], 1.0)
            np.testing.assert_array_equal(got[0], np.zeros(3))
            # An inf or NaN norm makes every element NaN, the norm inf or NaN.
            for bad in (np.inf, np.nan):
                _, got = self._check(dtype, [np.array([1.0, bad]), np.ones(2)], 1.0)
                self.assertTrue(np.isnan(got[0].astype(np.float32)).all())
                self.assertTrue(np.isnan(got[1].astype(np.float32)).all())


class TensorRTTest(unittest.TestCase):
    def test_double_is_refused(self):
        cases = {
            "MatrixMul": lambda x: tfco.matrix_mul(x, x),
            "ZeroOut": lambda x: tfco.zero_out(x),
            "ClipByGlobalNorm": lambda x: tfco.clip_by_global_norm([x], 1.0)[0],
            "CheckNumericsN": lambda x: tfco.check_numerics_n([x], "x"),
        }
        for op, fn in cases.items():
            with self.assertRaisesRegex(
                tfco.onnx.ExportError,
                rf"CustomOps>{op} \(node .*\): TensorRT computes double as float",
            ):
                tfco.onnx.export(
                    tf.function(fn),
                    [tf.TensorSpec([None, None], tf.float64)],
                    target="tensorrt",
                )

    def test_clip_by_global_norm_sums_in_float(self):
        rng = np.random.default_rng(6)
        tensors = [rng.standard_normal((64, 33)), rng.standard_normal(1000)]
        tensors = [t.astype(np.float32) for t in tensors]
        clip = np.array(3.0, np.float32)

        def fn(a, b, c):
            clipped, norm = tfco.clip_by_global_norm([a, b], c)
            return [*clipped, norm]

        specs = [
            tf.TensorSpec([None, None], tf.float32),
            tf.TensorSpec([None], tf.float32),
            tf.TensorSpec([], tf.float32),
        ]
        expected, got, model = onnx_test_util.export_and_run(
            tf.function(fn), specs, [*tensors, clip], target="tensorrt"
        )
        casts = [n for n in model.graph.node if n.op_type == "Cast"]
        self.assertNotIn(onnx.TensorProto.DOUBLE, [c.attribute[0].i for c in casts])
        # A float sum of 3112 squares: within 1e-6 of the double one.
        for e, g in zip(expected, got):
            np.testing.assert_allclose(g, e, rtol=1e-6)


class CheckNumericsNTest(unittest.TestCase):
    def test_passes_tensors_through(self):
        x = np.array([[1, np.nan], [np.inf, 2]], np.float32)
        y = np.array([0.5, -np.inf], np.float16)
        z = np.array(3.0)
        fn = tf.function(lambda a, b, c: tfco.check_numerics_n([a, b, c], "checked"))
        specs = [
            tf.TensorSpec([None, None], tf.float32),
            tf.TensorSpec([None], tf.float16),
            tf.TensorSpec([], tf.float64),
        ]
        model = tfco.onnx.export(fn, specs)
        got = onnx_test_util.run(model, [x, y, z])
        for g, e in zip(got, (x, y, z)):
            self.assertEqual(g.dtype, e.dtype)
            np.testing.assert_array_equal(g, e)
        self.assertEqual({n.op_type for n in model.graph.node}, {"Identity"})


class RoiBoxCountsTest(unittest.TestCase):
    def test_counts_are_clamped_to_the_boxes(self):
        for dtype in (tf.int32, tf.int64):
            fn = tf.function(
                lambda f, b, c: _OPS.custom_ops_roi_box_counts(
                    features=f, rois=b, box_counts=c
                )
            )
            specs = [
                tf.TensorSpec([None, None, None, None], tf.float32),
                tf.TensorSpec([None, None, 4], tf.float32),
                tf.TensorSpec([None], dtype),
            ]
            features = np.zeros((3, 2, 2, 1), np.float32)
            boxes = np.zeros((3, 5, 4), np.float32)
            counts = np.array([0, 2, 5], dtype.as_numpy_dtype)
            expected, got, _ = onnx_test_util.export_and_run(
                fn, specs, [features, boxes, counts]
            )
            np.testing.assert_array_equal(got[0], expected[0])
            self.assertEqual(got[0].dtype, dtype.as_numpy_dtype)
            # Where the kernel refuses, the model clamps, as the HLO lowering.
            model = tfco.onnx.export(fn, specs)
            bad = np.array([-1, 3, 7], dtype.as_numpy_dtype)
            got = onnx_test_util.run(model, [features, boxes, bad])[0]
            np.testing.assert_array_equal(got, [0, 3, 5])

    def test_layers_with_box_counts_export(self):
        features = tf.keras.Input((6, 7, 4))
        boxes = tf.keras.Input((3, 4))
        counts = tf.keras.Input((), dtype="int32")
        pooled = tfco.layers.RoIAlign(2, sampling_ratio=2)([features, boxes, counts])
        model = tf.keras.Model([features, boxes, counts], pooled)
        rng = np.random.default_rng(5)
        x = [
            rng.standard_normal((2, 6, 7, 4)).astype(np.float32),
            (rng.uniform(0, 5, (2, 3, 4)) * 2).round().astype(np.float32) / 2,
            np.array([3, 1], np.int32),
        ]
        x[1][..., 2:] += x[1][..., :2]
        got = onnx_test_util.run(tfco.onnx.export(model), x)[0]
        np.testing.assert_array_equal(got, model(x))


if __name__ == "__main__":
    unittest.main()
