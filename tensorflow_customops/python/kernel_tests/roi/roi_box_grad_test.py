"""Box gradients of roi_align, ps_roi_align and multi_scale_roi_align against
float64 numeric Jacobians (within the float32 rounding of the box gradient,
which has the boxes' type; with float64 boxes and features, to 1e-7 at a step
of 1e-6), for every box form and both layouts, eager and under jit; the C++
gradient and the second-order paths through the boxes; zero box gradients of
the pooling ops.

The pooled values are bilinear in the sample positions inside a pixel cell,
and the positions are linear in the box coordinates at a fixed sampling grid.
Boxes are drawn so that no sample comes within the perturbation of a pixel
row or column (where the slope changes, and where the map's border clamps),
no adaptive grid changes size and no legacy box crosses the one-pixel floor:
central differences are then exact up to float64 rounding.
"""

import contextlib
import math
import zlib

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import xla_test_util
from tensorflow_customops.python.kernel_tests.gradient_test_util import (
    symbolic_gradient_of,
)
from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()

# Exactly representable steps of float32 box coordinates below 2^15.
_EPS = 2.0**-8
# The step for float64 boxes, as a careful user would take it.
_EPS64 = 1e-6
_BATCH, _HEIGHT, _WIDTH = 2, 7, 9
_OUTPUT = (2, 3)
_ALIGN_OPS = ("roi_align", "ps_roi_align")


def _positions(start, extent, bins, ratio):
    """Sample positions of every bin along one axis, and the grid size."""
    bin_size = extent / bins
    grid = ratio if ratio > 0 else math.ceil(bin_size)
    return [
        start + b * bin_size + (i + 0.5) * bin_size / grid
        for b in range(bins)
        for i in range(max(grid, 0))
    ], bin_size


def _smooth(box, scale, sampling_ratio, aligned, legacy_floor):
    """Whether every sample of `box` (x1, y1, x2, y2) stays inside one pixel
    cell, and the grid and floor stay put, under perturbations of _EPS."""
    margin = 4 * _EPS * scale
    offset = 0.5 if aligned else 0.0
    for near, far, bins in ((box[0], box[2], _OUTPUT[1]), (box[1], box[3], _OUTPUT[0])):
        start = near * scale - offset
        extent = far * scale - offset - start
        if legacy_floor:
            if abs(extent - 1) < margin:
                return False
            extent = max(extent, 1.0)
        positions, bin_size = _positions(start, extent, bins, sampling_ratio)
        if sampling_ratio <= 0 and abs(bin_size - round(bin_size)) < margin:
            return False
        if not positions or any(abs(p - round(p)) < margin for p in positions):
            return False
    return True


def _boxes(seed, count, scale, sampling_ratio, aligned, legacy_floor):
    """`count` float32 boxes (x1, y1, x2, y2) in image coordinates, some
    reaching past the map's border, none near a kink."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        x = np.sort(rng.uniform(-1.5, _WIDTH + 0.5, 2)) / scale
        y = np.sort(rng.uniform(-1.5, _HEIGHT + 0.5, 2)) / scale
        box = np.float32([x[0], y[0], x[1], y[1]])
        if _smooth(
            box.astype(np.float64), scale, sampling_ratio, aligned, legacy_floor
        ):
            found.append(box)
    return np.stack(found)


def _numeric_vjp(fn, boxes, upstream, eps=_EPS):
    """d<upstream, fn(boxes)>/d(boxes) by central differences of step `eps`
    over each box coordinate (the last four columns), in float64; boxes is a
    float32 or float64 array."""
    flat = boxes.reshape(-1)
    result = np.zeros(flat.shape, np.float64)
    columns = boxes.shape[-1]
    for i in range(flat.size):
        if i % columns < columns - 4:
            continue  # a [K, 5] row's batch index
        values = []
        for sign in (1, -1):
            moved = flat.copy()
            moved[i] += flat.dtype.type(sign * eps)
            out = fn(moved.reshape(boxes.shape))
            values.append(np.sum(np.asarray(out, np.float64) * upstream))
        result[i] = (values[0] - values[1]) / (2 * eps)
    return result.reshape(boxes.shape)


def _features(seed, op, data_format):
    channels = 2 * _OUTPUT[0] * _OUTPUT[1] if op == "ps_roi_align" else 3
    x = np.random.default_rng(seed).standard_normal((_BATCH, _HEIGHT, _WIDTH, channels))
    return np.transpose(x, [0, 3, 1, 2]) if data_format == "NCHW" else x


# Each form: (per-image boxes [N, L, 4] as float32, box_counts) -> (the boxes
# argument, a function from the differentiated array back to that argument,
# the differentiated array).
def _rows(per_image, counts):
    rows = np.concatenate(
        [
            np.concatenate([np.full((c, 1), n, b.dtype), b[:c]], 1)
            for n, (b, c) in enumerate(zip(per_image, counts))
        ]
    )
    return lambda a: a, rows


def _batched(per_image, counts):
    return lambda a: a, per_image


def _ragged(per_image, counts):
    flat = np.concatenate([b[:c] for b, c in zip(per_image, counts)])
    splits = np.cumsum([0] + list(counts))
    return lambda a: tf.RaggedTensor.from_row_splits(a, splits), flat


def _box_list(per_image, counts):
    flat = np.concatenate([b[:c] for b, c in zip(per_image, counts)])
    splits = np.cumsum([0] + list(counts))
    return lambda a: [
        tf.convert_to_tensor(a)[splits[n] : splits[n + 1]] for n in range(len(counts))
    ], flat


_FORMS = {
    "rows": (_rows, False),
    "batched": (_batched, False),
    "batched_counts": (_batched, True),
    "ragged": (_ragged, False),
    "list": (_box_list, False),
}


def _pooling_of_boxes(
    op, form, per_image, seed, data_format, scale, sampling_ratio, aligned
):
    """`op` on seeded features as a function of the boxes of `per_image`
    ([2, 3, 4]) in box form `form` (the last box of image 1 padding or left
    out where the form has counts), with those boxes, the counts and whether
    the call passes them as `box_counts`."""
    make, with_counts = _FORMS[form]
    counts = [3, 1] if with_counts or form in ("ragged", "list", "rows") else [3, 3]
    to_arg, boxes = make(per_image, counts)
    features = tf.constant(_features(seed, op, data_format))
    kwargs = dict(
        output_size=_OUTPUT,
        spatial_scale=scale,
        sampling_ratio=sampling_ratio,
        aligned=aligned,
        data_format=data_format,
    )
    if with_counts:
        kwargs["box_counts"] = counts

    def fn(b):
        return getattr(tfco, op)(features, to_arg(b), **kwargs)

    return fn, boxes, counts, with_counts


class RoiBoxGradTest(tf.test.TestCase, parameterized.TestCase):
    def _check(self, fn, boxes, seed):
        """fn's box gradient (through GradientTape) against the numeric one:
        to 1e-6 for float32 boxes, whose gradient is float32, and to 1e-7 at a
        step of 1e-6 for float64 boxes."""
        boxes_t = tf.constant(boxes)
        with tf.GradientTape() as tape:
            tape.watch(boxes_t)
            out = fn(boxes_t)
        values = out.flat_values if isinstance(out, tf.RaggedTensor) else out
        upstream = np.random.default_rng(seed).standard_normal(values.shape)
        grad = tape.gradient(values, boxes_t, output_gradients=upstream)
        float64 = boxes.dtype == np.float64
        numeric = _numeric_vjp(
            lambda b: (
                lambda o: o.flat_values if isinstance(o, tf.RaggedTensor) else o
            )(fn(tf.constant(b))),
            boxes,
            upstream,
            eps=_EPS64 if float64 else _EPS,
        )
        self.assertEqual(grad.dtype, boxes.dtype)
        tolerance = 1e-7 if float64 else 1e-6
        self.assertAllClose(grad, numeric, rtol=tolerance, atol=tolerance)
        return grad

    @parameterized.product(
        op=_ALIGN_OPS,
        form=sorted(_FORMS),
        data_format=["NHWC", "NCHW"],
        sampling_ratio=[-1, 2],
        aligned=[True, False],
    )
    def test_box_gradient_matches_numeric_jacobian(
        self, op, form, data_format, sampling_ratio, aligned
    ):
        seed = zlib.crc32(f"{op}{form}{data_format}{sampling_ratio}{aligned}".encode())
        scale = 0.5
        legacy_floor = op == "roi_align" and not aligned
        per_image = _boxes(
            seed, 2 * 3, scale, sampling_ratio, aligned, legacy_floor
        ).reshape(2, 3, 4)
        fn, boxes, counts, with_counts = _pooling_of_boxes(
            op, form, per_image, seed, data_format, scale, sampling_ratio, aligned
        )
        grad = self._check(fn, boxes, seed)
        grad = np.asarray(grad)
        if form == "rows":
            self.assertAllEqual(grad[:, 0], np.zeros(len(grad)))
            grad = grad[:, 1:]
        if with_counts:
            # Padding boxes get no gradient; the real ones do.
            self.assertAllEqual(grad[1, 1:], np.zeros_like(grad[1, 1:]))
        # Some boxes reach past the border, where coordinates get no slope;
        # at least a quarter of the real ones get a gradient.
        self.assertGreaterEqual(np.count_nonzero(grad), sum(counts))

    @parameterized.product(
        op=_ALIGN_OPS,
        form=sorted(_FORMS),
        data_format=["NHWC", "NCHW"],
        jit=["", "custom_call", "hlo"],
    )
    def test_float64_box_gradient_matches_numeric_jacobian(
        self, op, form, data_format, jit
    ):
        if jit == "custom_call" and not xla_test_util.custom_calls():
            self.skipTest("the build has no XLA custom calls")
        if jit and (form not in ("rows", "batched_counts") or data_format == "NCHW"):
            self.skipTest("under jit, NHWC [K, 5] rows and padded boxes suffice")
        seed = zlib.crc32(f"f64{op}{form}{data_format}".encode())
        scale = 0.5
        aligned = op == "ps_roi_align"
        per_image = (
            _boxes(seed, 2 * 3, scale, 2, aligned, not aligned)
            .astype(np.float64)
            .reshape(2, 3, 4)
        )
        # Coordinates that float32 cannot hold, still away from any kink.
        per_image += np.random.default_rng(seed).uniform(-1e-4, 1e-4, per_image.shape)
        fn, boxes, counts, _ = _pooling_of_boxes(
            op, form, per_image, seed, data_format, scale, 2, aligned
        )
        if jit:
            fn = tf.function(fn, jit_compile=True)
        if jit == "hlo":
            with xla_test_util.hlo_lowering():
                grad = self._check(fn, boxes, seed)
        else:
            grad = self._check(fn, boxes, seed)
        self.assertGreaterEqual(np.count_nonzero(grad), sum(counts))

    @parameterized.parameters(["NHWC", "NCHW"])
    def test_multi_scale_box_gradient_matches_numeric_jacobian(self, data_format):
        rng = np.random.default_rng(11)
        levels = [
            rng.standard_normal((1, 16, 16, 2)),
            rng.standard_normal((1, 8, 8, 2)),
        ]
        if data_format == "NCHW":
            levels = [np.transpose(x, [0, 3, 1, 2]) for x in levels]
        levels = [tf.constant(x) for x in levels]
        # Two boxes pooled from each level, smooth on that level.
        boxes = []
        for seed, scale, level in ((1, 0.25, 2), (2, 0.125, 3)):
            candidates = _boxes(seed, 40, scale, 2, False, True)
            size = np.sqrt(
                (candidates[:, 2] - candidates[:, 0])
                * (candidates[:, 3] - candidates[:, 1])
            )
            pooled_from = np.clip(np.floor(3 + np.log2(size / 16) + 1e-6), 2, 3)
            boxes.append(candidates[pooled_from == level][:2])
            self.assertLen(boxes[-1], 2)
        boxes = np.concatenate(boxes)
        rows = np.concatenate([np.zeros((len(boxes), 1), np.float32), boxes], 1)

        def fn(b):
            return tfco.multi_scale_roi_align(
                levels,
                b,
                _OUTPUT,
                spatial_scales=[0.25, 0.125],
                sampling_ratio=2,
                canonical_scale=16,
                canonical_level=3,
                data_format=data_format,
            )

        self._check(fn, rows, 3)

    @parameterized.product(
        op=_ALIGN_OPS,
        dtypes=[
            (tf.float32, np.float32),
            (tf.float64, np.float32),
            (tf.float64, np.float64),
        ],
    )
    def test_cpp_box_gradient_equals_python(self, op, dtypes):
        dtype, boxes_dtype = dtypes
        boxes = _boxes(5, 4, 1.0, -1, True, False).astype(boxes_dtype)
        boxes += (
            np.random.default_rng(5)
            .uniform(-1e-4, 1e-4, boxes.shape)
            .astype(boxes_dtype)
        )
        rows = np.concatenate([boxes_dtype([[0], [1], [1], [0]]), boxes], 1)
        with tf.Graph().as_default():
            features = tf.cast(_features(5, op, "NHWC"), dtype)
            rois = tf.constant(rows)
            out = getattr(tfco, op)(features, rois, _OUTPUT, sampling_ratio=-1)
            upstream = tf.cast(
                np.random.default_rng(5).standard_normal(out.shape), dtype
            )
            (python_grad,) = tf.gradients(out, rois, grad_ys=upstream)
            _, cpp_grad = symbolic_gradient_of(out.op, [upstream])
            with tf.compat.v1.Session() as sess:
                python_value, cpp_value = sess.run([python_grad, cpp_grad])
        self.assertEqual(python_value.dtype, boxes_dtype)
        self.assertAllEqual(cpp_value, python_value)
        self.assertGreater(np.count_nonzero(python_value), 8)

    @parameterized.parameters(["roi_pool", "ps_roi_pool"])
    def test_pooling_box_gradient_is_zero(self, op):
        # The boxes are rounded to whole pixels: the output is piecewise
        # constant in their coordinates.
        rows = tf.constant([[0, 0.3, 0.6, 5.2, 4.7], [1, 1.1, 0.2, 3.3, 6.1]])
        features = tf.constant(_features(6, "ps_roi_align", "NHWC"))
        with tf.GradientTape() as tape:
            tape.watch(rows)
            out = getattr(tfco, op)(features, rows, _OUTPUT)
        self.assertAllEqual(tape.gradient(out, rows), tf.zeros_like(rows))

    @parameterized.parameters(*_ALIGN_OPS)
    def test_second_order_through_feature_gradient(self, op):
        # d/d(boxes) of <h, d<u, out>/d(features)> is the box gradient fed u
        # and h; checked numerically.
        boxes = _boxes(7, 3, 1.0, 2, True, False)
        rows = np.concatenate([np.float32([[0], [1], [0]]), boxes], 1)
        features = tf.constant(_features(7, op, "NHWC"))
        rng = np.random.default_rng(7)
        shape = getattr(tfco, op)(features, rows, _OUTPUT, sampling_ratio=2).shape
        u = tf.constant(rng.standard_normal(shape))
        h = rng.standard_normal(features.shape)

        def feature_grad(b):
            with tf.GradientTape() as tape:
                tape.watch(features)
                out = getattr(tfco, op)(features, b, _OUTPUT, sampling_ratio=2)
            return tape.gradient(out, features, output_gradients=u)

        rows_t = tf.constant(rows)
        with tf.GradientTape() as outer:
            outer.watch(rows_t)
            g = feature_grad(rows_t)
        second = outer.gradient(g, rows_t, output_gradients=h)
        numeric = _numeric_vjp(lambda b: feature_grad(tf.constant(b)), rows, h)
        self.assertAllClose(second, numeric, rtol=1e-6, atol=1e-6)
        self.assertGreater(np.count_nonzero(second), 6)

    @parameterized.parameters(*_ALIGN_OPS)
    def test_second_order_through_box_gradient_raises(self, op):
        rows = tf.constant([[0, 0.5, 0.5, 4.5, 3.5]])
        features = tf.constant(_features(8, op, "NHWC"))

        def second_order(rows, upstream=None):
            with tf.GradientTape() as outer:
                outer.watch(rows)
                with tf.GradientTape() as inner:
                    inner.watch(rows)
                    out = getattr(tfco, op)(features, rows, _OUTPUT)
                box_grad = inner.gradient(out, rows)
            return outer.gradient(box_grad, rows, output_gradients=upstream)

        message = (
            r"CustomOps>(Ps)?RoiAlignGradBoxes has no gradient: second derivatives "
            r"through RoI box coordinates are not implemented \(stop the gradient"
        )
        # Eagerly the plain message; in a graph, CheckCondition's (the same).
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "^" + message):
            second_order(rows)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            tf.function(second_order)(rows)
        # Under jit, ones flowing in are known when XLA compiles: the
        # compilation fails, on either lowering.
        for hlo in (False, True):
            with xla_test_util.hlo_lowering() if hlo else contextlib.nullcontext():
                with self.subTest(hlo=hlo):
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, message
                    ):
                        tf.function(second_order, jit_compile=True)(rows)
        # An upstream gradient known at run time only: the custom call raises,
        # and zeros give zeros; the HLO lowering cannot raise and gives zeros.
        upstream = tf.ones_like(rows)
        if xla_test_util.custom_calls():
            jit = tf.function(second_order, jit_compile=True)
            with self.assertRaisesRegex(xla_test_util.data_error(), message):
                jit(rows, upstream)
            self.assertAllEqual(jit(rows, 0 * upstream), tf.zeros_like(rows))
        with xla_test_util.hlo_lowering():
            jit = tf.function(second_order, jit_compile=True)
            self.assertAllEqual(jit(rows, upstream), tf.zeros_like(rows))
        # With nothing flowing in, it is zero.
        with tf.GradientTape() as outer:
            outer.watch(features)
            with tf.GradientTape() as inner:
                inner.watch([features, rows])
                out = getattr(tfco, op)(features, rows, _OUTPUT)
            grads = inner.gradient(out, [features, rows])
            loss = tf.reduce_sum(grads[0]) + 0 * tf.cast(
                tf.reduce_sum(grads[1]), tf.float64
            )
        second = outer.gradient(loss, features)  # grads[0] is linear
        self.assertTrue(second is None or not np.any(second))

    def test_box_gradient_op_validates_its_inputs(self):
        features = tf.zeros([1, 4, 4, 3])
        grads = tf.zeros([1, 2, 2, 3])
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"rois\[0, 0\] \(batch index\) must be an integer in \[0, 1\), got 1",
        ):
            _ops.custom_ops_roi_align_grad_boxes(
                grads=grads,
                features=features,
                rois=[[1.0, 0, 0, 2, 2]],
                pooled_height=2,
                pooled_width=2,
            )
        with self.assertRaisesRegex(
            (tf.errors.InvalidArgumentError, ValueError), r"grads"
        ):
            _ops.custom_ops_roi_align_grad_boxes(
                grads=tf.zeros([1, 3, 2, 3]),
                features=features,
                rois=[[0.0, 0, 0, 2, 2]],
                pooled_height=2,
                pooled_width=2,
            )
        empty = _ops.custom_ops_roi_align_grad_boxes(
            grads=tf.zeros([0, 2, 2, 3]),
            features=features,
            rois=tf.zeros([0, 5]),
            pooled_height=2,
            pooled_width=2,
        )
        self.assertEqual(empty.shape, [0, 5])


if __name__ == "__main__":
    tf.test.main()
