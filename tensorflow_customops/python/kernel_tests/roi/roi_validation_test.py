"""Bad input to the RoI ops and their gradient ops: each case is a clear
InvalidArgument (or ValueError from the wrapper) whose message is asserted,
never a crash or garbage."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python import registry
from tensorflow_customops.python.kernel_tests.roi import roi_test_util as util
from tensorflow_customops.python.ops import roi_checks, roi_ops
from tensorflow_customops.python.registry import roi as roi_registry

_raw = roi_ops._ops
_BAD_INPUT = (tf.errors.InvalidArgumentError, ValueError)


def _features(op, batch=2, height=6, width=7):
    channels = 2 * 2 * 2 if op in util.POSITION_SENSITIVE else 3
    return tf.random.stateless_normal([batch, height, width, channels], seed=[1, 2])


def _call(op, features, rois, **kwargs):
    kwargs.setdefault("output_size", 2)
    return getattr(tfco, op)(features, rois, **kwargs)


def _raw_call(op, features, rois, **kwargs):
    """The raw op, past the wrapper's own checks."""
    return getattr(_raw, "custom_ops_" + op)(
        features=features, rois=rois, pooled_height=2, pooled_width=2, **kwargs
    )


class RoiValidationTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(
        op=util.OP_NAMES,
        rois=[
            np.zeros([5], np.float32),
            np.zeros([2, 4], np.float32),
            np.zeros([2, 6], np.float32),
            np.zeros([1, 2, 5], np.float32),
        ],
    )
    def test_rois_shape(self, op, rois):
        with self.assertRaisesRegex(_BAD_INPUT, r"rois must have shape \[K, 5\]"):
            _call(op, _features(op), rois)

    @parameterized.product(op=util.OP_NAMES, index=[0.5, -1.0, 2.0, 1e9])
    def test_batch_index(self, op, index):
        rois = [[0, 1, 1, 3, 3], [index, 1, 1, 3, 3]]
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"rois\[1, 0\] \(batch index\) must be an integer in \[0, 2\)",
        ):
            _call(op, _features(op), rois)

    @parameterized.product(op=util.OP_NAMES, value=[np.nan, np.inf, -np.inf])
    def test_non_finite_coordinates(self, op, value):
        rois = [[0, 1, 1, 3, 3], [1, 1, value, 3, 3]]
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"rois\[1, 2\] is not finite"
        ):
            _call(op, _features(op), rois)

    @parameterized.product(
        op=util.OP_NAMES,
        box_and_scale=[
            ([0, 0, 0, 3e38, 3e38], 2.0),  # Finite, but overflows float once scaled.
            ([0, -2e9, 1, 3, 3], 1.0),
            ([0, 1, 1, 6e8, 3], 2.0),
        ],
    )
    def test_scaled_coordinates_bound(self, op, box_and_scale):
        # Found by fuzzing: such boxes made NaN or huge sample positions that
        # were converted to integers (undefined behaviour) and used as offsets.
        box, scale = box_and_scale
        kwargs = {"sampling_ratio": 2} if op in util.SAMPLING else {}
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"rois\[1, \d\] \* spatial_scale = .* is outside \[-2\^30, 2\^30\]",
        ):
            rois = [[0, 1, 1, 3, 3], box]
            _call(op, _features(op), rois, spatial_scale=scale, **kwargs)

    @parameterized.parameters(util.OP_NAMES)
    def test_far_box_within_bound_runs(self, op):
        # Off the map but within the bound: sampled as zeros, never garbage.
        kwargs = {"sampling_ratio": 2} if op in util.SAMPLING else {}
        rois = [[0, 1e9, 1e9, 1.07e9, 1.07e9], [1, -1e9, -1e9, -9e8, -9e8]]
        pooled = _call(op, _features(op), rois, **kwargs)
        self.assertAllEqual(pooled, tf.zeros_like(pooled))

    @parameterized.product(op=util.OP_NAMES, output_size=[0, -1, (2, 0), (3,)])
    def test_output_size_in_wrapper(self, op, output_size):
        error = TypeError if output_size == (3,) else ValueError
        with self.assertRaisesRegex(error, r"output_size must be"):
            _call(op, _features(op), [[0, 1, 1, 3, 3]], output_size=output_size)

    @parameterized.parameters(
        "custom_ops_roi_pool",
        "custom_ops_roi_align",
        "custom_ops_ps_roi_pool",
        "custom_ops_ps_roi_align",
    )
    def test_output_size_in_raw_op(self, raw_op):
        with self.assertRaisesRegex(
            _BAD_INPUT, r"pooled_height.*must be at least minimum 1"
        ):
            getattr(_raw, raw_op)(
                tf.zeros([1, 4, 4, 4]),
                tf.zeros([1, 5]),
                pooled_height=0,
                pooled_width=1,
            )

    # 1e-39 is a float32 subnormal, which the kernels would read as 0.
    @parameterized.product(op=util.OP_NAMES, scale=[0.0, -0.5, np.nan, np.inf, 1e-39])
    def test_spatial_scale(self, op, scale):
        rois = [[0, 1, 1, 3, 3]]
        with self.assertRaisesRegex(
            ValueError, r"spatial_scale must be a finite positive number"
        ):
            _call(op, _features(op), rois, spatial_scale=scale)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"spatial_scale must be finite and positive",
        ):
            _raw_call(op, _features(op), rois, spatial_scale=scale)

    @parameterized.parameters(util.OP_NAMES)
    def test_dynamic_map_dimensions_under_jit_are_refused(self, op):
        # Read at its bound, a masked height would pool padding; boxes may
        # have a dynamic count.
        # The masks are arguments: a constant one would be folded away.
        features = _features(op)
        rows = tf.constant([[0, 0, 0, 2, 2], [0, 1, 1, 3, 3]], tf.float32)
        keep_rows = tf.constant([True, True, False, True, True, True])
        keep_boxes = tf.constant([True, False])

        def masked_height(keep):
            return _call(op, tf.boolean_mask(features, keep, axis=1), rows)

        def masked_boxes(keep):
            return _call(op, features, tf.boolean_mask(rows, keep))

        self.assertIsNotNone(masked_height(keep_rows))
        with self.assertRaisesRegex(
            tf.errors.UnimplementedError,
            r"under XLA: dimension 1 of features is dynamic \(at most 6",
        ):
            tf.function(masked_height, jit_compile=True)(keep_rows)
        self.assertAllClose(
            tf.function(masked_boxes, jit_compile=True)(keep_boxes),
            masked_boxes(keep_boxes),
        )

    @parameterized.parameters(util.OP_NAMES)
    def test_subnormal_spatial_scale_fails_when_the_graph_is_built(self, op):
        # The shape function sees the value the kernels would read as 0.
        fn = tf.function(
            lambda: _raw_call(op, _features(op), [[0, 1, 1, 3, 3]], spatial_scale=1e-39)
        )
        with self.assertRaisesRegex(
            ValueError, r"at least 2\^-126 \(float's smallest normal number\), got "
        ):
            fn.get_concrete_function()

    @parameterized.product(op=sorted(util.SAMPLING), ratio=[65, 10**6])
    def test_sampling_ratio_bound(self, op, ratio):
        rois = [[0, 1, 1, 3, 3]]
        with self.assertRaisesRegex(ValueError, r"sampling_ratio must be at most 64"):
            _call(op, _features(op), rois, sampling_ratio=ratio)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"sampling_ratio must be at most 64"
        ):
            _raw_call(op, _features(op), rois, sampling_ratio=ratio)

    @parameterized.parameters(sorted(util.SAMPLING))
    def test_sampling_ratio_bound_is_the_ops(self, op):
        # roi_checks mirrors kMaxSamplingRatio: the op takes the bound and
        # refuses one more, as the wrapper does.
        bound = roi_checks._MAX_SAMPLING_RATIO
        rois = [[0, 1, 1, 3, 3]]
        _raw_call(op, _features(op), rois, sampling_ratio=bound)
        self.assertEqual(roi_checks.check_sampling_ratio(bound), bound)
        message = rf"sampling_ratio must be at most {bound} .*got {bound + 1}"
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            _raw_call(op, _features(op), rois, sampling_ratio=bound + 1)
        with self.assertRaisesRegex(ValueError, message):
            roi_checks.check_sampling_ratio(bound + 1)

    @parameterized.product(op=sorted(util.SAMPLING), jit=[False, True])
    def test_adaptive_grid_has_no_cap(self, op, jit):
        # torchvision's rule: ceil(bin size) samples per axis, however many.
        # Only those that can land on the map are visited, so a box a million
        # pixels wide costs what the map's size allows. On a map of ones,
        # every sample on the map is 1 and a bin averages over its whole
        # grid: the result is the share of samples on the map.
        height, width = 6, 7
        features = tf.ones(
            [1, height, width, 4 if op in util.POSITION_SENSITIVE else 3]
        )
        # Samples at half-integer positions: 100 per axis in [-50, 50] and a
        # million in [-5e5, 5e5], of which 0.5 .. size - 0.5 and -0.5 land.
        rois = [[0, -50, -50, 50, 50], [0, -5e5, -5e5, 5e5, 5e5]]

        def pool(x):
            return getattr(tfco, op)(
                x, rois, output_size=1, sampling_ratio=-1, aligned=False
            )

        pooled = (
            tf.function(pool, jit_compile=True)(features) if jit else pool(features)
        )
        on_map = (height + 1) * (width + 1)
        expected = np.array([on_map / 100**2, on_map / 1e6**2])
        self.assertAllClose(np.asarray(pooled)[:, 0, 0, 0], expected, rtol=1e-5, atol=0)

    @parameterized.parameters(sorted(util.POSITION_SENSITIVE))
    def test_channel_divisibility(self, op):
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"features channels \(6\) must be divisible by the number of output "
            r"bins pooled_height \* pooled_width = 4",
        ):
            _call(op, tf.zeros([1, 5, 5, 6]), [[0, 1, 1, 3, 3]])

    @parameterized.parameters(sorted(util.POSITION_SENSITIVE))
    def test_channel_divisibility_in_shape_function(self, op):
        with tf.Graph().as_default():
            with self.assertRaisesRegex(
                ValueError,
                r"features channels \(6\) must be divisible by the number of output "
                r"bins pooled_height \* pooled_width = 4",
            ):
                _call(
                    op,
                    tf.compat.v1.placeholder(tf.float32, [None, 5, 5, 6]),
                    tf.compat.v1.placeholder(tf.float32, [None, 5]),
                )

    @parameterized.parameters(util.OP_NAMES)
    def test_data_format(self, op):
        with self.assertRaisesRegex(ValueError, r"data_format must be 'NHWC' or"):
            _call(op, _features(op), [[0, 1, 1, 3, 3]], data_format="NCWH")
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"data_format.*not in the list"
        ):
            _raw_call(op, _features(op), [[0, 1, 1, 3, 3]], data_format="NCWH")

    @parameterized.product(op=util.OP_NAMES, shape=[[4, 4, 3], [1, 1, 4, 4, 3]])
    def test_features_rank(self, op, shape):
        with self.assertRaisesRegex(ValueError, r"features must have rank 4"):
            _call(op, tf.zeros(shape), [[0, 1, 1, 3, 3]])
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"features must be 4-D"
        ):
            _raw_call(op, tf.zeros(shape), [[0, 1, 1, 3, 3]])

    @parameterized.parameters(util.OP_NAMES)
    def test_shape_function_checks_shapes(self, op):
        # With the kernels' messages: one rule (roi_shape.h) serves both.
        rois_message = r"rois must have shape \[K, 5\] with rows .*, got shape "
        with tf.Graph().as_default():
            features = tf.compat.v1.placeholder(tf.float32, [None, 5, 5, 8])
            with self.assertRaisesRegex(ValueError, rois_message + r"\[5\]"):
                _raw_call(op, features, tf.compat.v1.placeholder(tf.float32, [5]))
            with self.assertRaisesRegex(ValueError, rois_message + r"\[\?,4\]"):
                _raw_call(op, features, tf.compat.v1.placeholder(tf.float32, [None, 4]))
            with self.assertRaisesRegex(
                ValueError, r"features must be 4-D \(NHWC\), got shape \[5,5,8\]"
            ):
                _raw_call(
                    op,
                    tf.compat.v1.placeholder(tf.float32, [5, 5, 8]),
                    [[0, 0, 0, 1, 1]],
                )

    @parameterized.parameters(util.OP_NAMES)
    def test_bad_dtype(self, op):
        features = tf.zeros([1, 4, 4, 8], tf.int32)
        with self.assertRaisesRegex(
            TypeError,
            r"features must be float16, bfloat16, float32 or float64, got int32; "
            r"cast them first",
        ):
            _call(op, features, [[0, 1, 1, 3, 3]])
        with self.assertRaisesRegex(
            (TypeError, tf.errors.InvalidArgumentError), r"allowed values"
        ):
            _raw_call(op, features, [[0, 1, 1, 3, 3]])

    @parameterized.parameters(util.OP_NAMES)
    def test_output_size_overflow(self, op):
        # Huge channel counts of an empty map: a valid, empty tensor whose
        # pooled output would have more than 2^63 elements.
        if op in util.POSITION_SENSITIVE:
            channels, output_size = 2**62, (2, 2)
        else:
            channels, output_size = 2**40, (2**12, 2**12)
        features = tf.zeros([1, 0, 0, channels])
        rois = np.zeros([600, 5], np.float32)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"overflow"):
            _call(op, features, rois, output_size=output_size)

    @parameterized.parameters(util.OP_NAMES)
    def test_feature_area_bound(self, op):
        features = tf.zeros([1, 2**16, 2**16, 0])
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"height \* width must be below 2\^31"
        ):
            _call(op, features, [[0, 1, 1, 3, 3]])


class RoiGradValidationTest(tf.test.TestCase, parameterized.TestCase):
    def _grad_op(self, name, grads, rois, features_shape, argmax=None, **attrs):
        attrs.setdefault("pooled_height", 2)
        attrs.setdefault("pooled_width", 2)
        fn = getattr(_raw, f"custom_ops_{name}_grad")
        if name == "roi_pool":
            return fn(grads, rois, argmax, features_shape, **attrs)
        return fn(grads, rois, features_shape, **attrs)

    def _args(self, name):
        channels = 8 if name.startswith("ps_") else 4
        out_channels = 2 if name.startswith("ps_") else 4
        grads = tf.ones([1, 2, 2, out_channels])
        argmax = tf.zeros([1, 2, 2, out_channels], tf.int32)
        return grads, [[0, 0, 0, 3, 3]], [1, 5, 5, channels], argmax

    @parameterized.parameters("roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align")
    def test_grads_shape(self, name):
        _, rois, shape, argmax = self._args(name)
        with self.assertRaisesRegex(_BAD_INPUT, r"grads must have shape|Dimension"):
            self._grad_op(name, tf.ones([1, 3, 2, 4]), rois, shape, argmax)

    @parameterized.parameters("roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align")
    def test_features_shape(self, name):
        grads, rois, _, argmax = self._args(name)
        with self.assertRaisesRegex(
            _BAD_INPUT, r"features_shape must be a vector of 4 elements|rank 4"
        ):
            self._grad_op(name, grads, rois, [1, 5, 5], argmax)
        with self.assertRaisesRegex(
            _BAD_INPUT, r"features_shape\[1\] must be non-negative|negative"
        ):
            self._grad_op(name, grads, rois, [1, -5, 5, 4], argmax)

    @parameterized.parameters("roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align")
    def test_batch_index_in_gradient(self, name):
        grads, _, shape, argmax = self._args(name)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"batch index\) must be an integer"
        ):
            self._grad_op(name, grads, [[3, 0, 0, 3, 3]], shape, argmax)

    @parameterized.parameters("roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align")
    def test_scaled_coordinates_bound_in_gradient(self, name):
        grads, _, shape, argmax = self._args(name)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"rois\[0, 3\] \* spatial_scale = .* is outside",
        ):
            rois = [[0, 0, 0, 3e38, 3]]
            self._grad_op(name, grads, rois, shape, argmax, spatial_scale=2.0)

    @parameterized.parameters(-2, 25, 2**31 - 1)
    def test_roi_pool_argmax_bounds(self, bad):
        grads, rois, shape, _ = self._args("roi_pool")
        argmax = np.zeros([1, 2, 2, 4], np.int32)
        argmax[0, 1, 0, 2] = bad
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            rf"argmax\[10\] = {bad} is not -1 or a pixel index in \[0, 25\)",
        ):
            self._grad_op("roi_pool", grads, rois, shape, argmax)

    def test_roi_pool_argmax_shape(self):
        grads, rois, shape, _ = self._args("roi_pool")
        with self.assertRaisesRegex(_BAD_INPUT, r"argmax must have shape|Dimension"):
            self._grad_op(
                "roi_pool", grads, rois, shape, tf.zeros([1, 2, 2, 3], tf.int32)
            )

    def test_the_fuzzer_has_a_hint_for_every_roi_op(self):
        # Random shapes almost never make a valid RoI call: without hints the
        # fuzzer would reach only the ops' validation.
        hints = registry.fuzz_hints()
        for entry in roi_registry.ENTRIES:
            self.assertIn(entry.op, hints)


if __name__ == "__main__":
    tf.test.main()
