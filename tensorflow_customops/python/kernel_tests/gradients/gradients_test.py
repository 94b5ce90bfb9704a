"""Tests of tfco.gradients: each utility against numeric gradients, each
shown to fix the failure it exists for, and each rejecting bad arguments by
name, also at run time in `tf.function` where values or shapes are unknown."""

import contextlib

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import xla_test_util


def _grad(fn, *xs, upstream=None):
    xs = [tf.convert_to_tensor(x) for x in xs]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = fn(*xs)
    return tape.gradient(y, xs, output_gradients=upstream)


class SafeWhereTest(tf.test.TestCase, parameterized.TestCase):
    def test_plain_where_gives_nan_gradient(self):
        # The failure: log's derivative at 0 is inf, and 0 * inf = NaN.
        (dx,) = _grad(lambda x: tf.where(x > 0, tf.math.log(x), 0.0), [0.0, 4.0])
        self.assertTrue(np.isnan(dx[0]))

    @parameterized.parameters(tf.float32, tf.float64)
    def test_safe_where_fixes_it(self, dtype):
        x = tf.constant([-1.0, 0.0, 4.0], dtype)
        (dx,) = _grad(
            lambda v: tfco.gradients.safe_where(v > 0, tf.sqrt, tf.zeros_like, v), x
        )
        self.assertAllClose(dx, [0.0, 0.0, 0.25])

    def test_log_branch(self):
        x = tf.constant([-2.0, 0.0, np.e])
        (dx,) = _grad(
            lambda v: tfco.gradients.safe_where(v > 0, tf.math.log, lambda u: u * u, v),
            x,
        )
        self.assertAllClose(dx, [-4.0, 0.0, 1.0 / np.e])

    def test_matches_numeric_gradient(self):
        x = tf.constant([-1.5, -0.2, 0.3, 2.0], tf.float64)
        fn = lambda v: tfco.gradients.safe_where(  # noqa: E731
            v > 0, tf.sqrt, lambda u: tf.sin(u) * 2.0, v
        )
        theoretical, numerical = tf.test.compute_gradient(fn, [x])
        self.assertAllClose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-6)

    def test_two_inputs(self):
        x = tf.constant([1.0, -1.0], tf.float64)
        y = tf.constant([4.0, 9.0], tf.float64)
        fn = lambda a, b: tfco.gradients.safe_where(  # noqa: E731
            a > 0, lambda u, w: tf.sqrt(u) * w, lambda u, w: w * 3.0, a, b
        )
        theoretical, numerical = tf.test.compute_gradient(fn, [x, y])
        for t, n in zip(theoretical, numerical):
            self.assertAllClose(t, n, rtol=1e-6, atol=1e-6)

    def test_in_tf_function_with_unknown_shape(self):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
        def grad(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tfco.gradients.safe_where(x > 0, tf.sqrt, tf.zeros_like, x)
            return tape.gradient(y, x)

        self.assertAllClose(grad(tf.constant([[-1.0, 4.0]])), [[0.0, 0.25]])


class StraightThroughRoundTest(tf.test.TestCase):
    def test_round_has_no_gradient(self):
        # The failure: nothing before tf.round gets a gradient.
        (dx,) = _grad(tf.round, [0.4, 1.6])
        self.assertIsNone(dx)

    def test_rounds_forward_and_passes_gradient(self):
        x = tf.constant([0.4, 1.6, -2.5, 2.5])
        self.assertAllEqual(
            tfco.gradients.straight_through_round(x), [0.0, 2.0, -2.0, 2.0]
        )
        (dx,) = _grad(tfco.gradients.straight_through_round, x, upstream=x * 2.0)
        self.assertAllEqual(dx, x * 2.0)

    def test_gradient_is_numeric_gradient_of_identity(self):
        # By design its gradient is the identity's (the surrogate), whose
        # numeric Jacobian it must match.
        x = tf.constant([0.3, -1.2, 2.7], tf.float64)
        theoretical, _ = tf.test.compute_gradient(
            tfco.gradients.straight_through_round, [x]
        )
        _, numerical = tf.test.compute_gradient(tf.identity, [x])
        self.assertAllClose(theoretical[0], numerical[0], rtol=1e-7, atol=1e-7)


class ClipGradientTest(tf.test.TestCase):
    def test_large_gradient_is_clipped(self):
        x = tf.constant([1.0, 2.0, 3.0])
        (plain,) = _grad(lambda v: v**4 * 100.0, x)
        self.assertGreater(float(tf.reduce_max(plain)), 1e3)  # the failure
        (clipped,) = _grad(
            lambda v: tfco.gradients.clip_gradient(v, -5.0, 5.0) ** 4 * 100.0, x
        )
        self.assertAllEqual(clipped, [5.0, 5.0, 5.0])

    def test_forward_is_identity_and_bounds_apply(self):
        x = tf.constant([1.0, 2.0, 3.0])
        self.assertAllEqual(tfco.gradients.clip_gradient(x, -1.0, 1.0), x)
        (dx,) = _grad(
            lambda v: tfco.gradients.clip_gradient(v, -1.0, 0.5),
            x,
            upstream=tf.constant([-3.0, 0.25, 3.0]),
        )
        self.assertAllEqual(dx, [-1.0, 0.25, 0.5])

    def test_matches_numeric_gradient_within_bounds(self):
        x = tf.constant([0.5, -2.0], tf.float64)
        theoretical, numerical = tf.test.compute_gradient(
            lambda v: tfco.gradients.clip_gradient(v, -10.0, 10.0) * 3.0, [x]
        )
        self.assertAllClose(theoretical[0], numerical[0], rtol=1e-7, atol=1e-7)


def _composed_cross_entropy(logits, labels):
    return -tf.reduce_sum(labels * tf.math.log(tf.nn.softmax(logits)), axis=-1)


class SoftmaxCrossEntropyTest(tf.test.TestCase, parameterized.TestCase):
    def _inputs(self, batch=4, classes=5, dtype=tf.float64):
        rng = np.random.default_rng(0)
        logits = tf.constant(rng.normal(size=(batch, classes)) * 3.0, dtype)
        labels = tf.nn.softmax(tf.constant(rng.normal(size=(batch, classes)), dtype))
        return logits, labels

    def test_matches_tf_and_numeric_gradient(self):
        logits, labels = self._inputs()
        self.assertAllClose(
            tfco.gradients.softmax_cross_entropy(logits, labels),
            tf.nn.softmax_cross_entropy_with_logits(labels, logits),
        )
        theoretical, numerical = tf.test.compute_gradient(
            tfco.gradients.softmax_cross_entropy, [logits, labels]
        )
        for t, n in zip(theoretical, numerical):
            self.assertAllClose(t, n, rtol=1e-6, atol=1e-6)

    @parameterized.parameters(tf.float32, tf.float64)
    def test_gradient_agrees_with_autodiff(self, dtype):
        logits, labels = self._inputs(dtype=dtype)
        upstream = tf.constant([1.0, -2.0, 0.5, 3.0], dtype)
        ours = _grad(
            tfco.gradients.softmax_cross_entropy, logits, labels, upstream=upstream
        )
        autodiff = _grad(_composed_cross_entropy, logits, labels, upstream=upstream)
        self.assertAllClose(ours, autodiff, rtol=1e-5, atol=1e-5)

    def test_gradient_is_probs_minus_labels(self):
        logits, labels = self._inputs()
        dlogits, _ = _grad(tfco.gradients.softmax_cross_entropy, logits, labels)
        self.assertAllClose(dlogits, tf.nn.softmax(logits) - labels)

    def test_extreme_logits(self):
        # The failure: softmax underflows to 0, log(0) = -inf, and the
        # composed form's loss is inf and its gradient NaN.
        logits = tf.constant([[1000.0, 0.0]])
        labels = tf.constant([[0.0, 1.0]])
        (composed,) = _grad(lambda z: _composed_cross_entropy(z, labels), logits)
        self.assertFalse(np.all(np.isfinite(composed)))
        loss = tfco.gradients.softmax_cross_entropy(logits, labels)
        (dlogits,) = _grad(
            lambda z: tfco.gradients.softmax_cross_entropy(z, labels), logits
        )
        self.assertAllClose(loss, [1000.0])
        self.assertAllClose(dlogits, [[1.0, -1.0]])

    def test_in_tf_function_with_unknown_shapes(self):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)] * 2)
        def grad(logits, labels):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                loss = tfco.gradients.softmax_cross_entropy(logits, labels)
            return tape.gradient(loss, logits)

        logits = tf.constant([[0.0, 0.0], [1.0, 1.0]])
        labels = tf.constant([[1.0, 0.0], [0.0, 1.0]])
        self.assertAllClose(grad(logits, labels), [[-0.5, 0.5], [0.5, -0.5]])


_X = tf.constant([1.0, 2.0])
_G = tfco.gradients


class ArgumentErrorsTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.parameters(
        # safe_where
        (
            lambda: _G.safe_where(_X > 0, "sqrt", tf.zeros_like, _X),
            TypeError,
            "x_fn must be a function of the inputs, got 'sqrt'",
        ),
        (
            lambda: _G.safe_where(_X > 0, tf.sqrt, None, _X),
            TypeError,
            "y_fn must be a function",
        ),
        (
            lambda: _G.safe_where(_X > 0, tf.sqrt, tf.zeros_like),
            ValueError,
            "safe_where needs at least one input",
        ),
        (
            lambda: _G.safe_where([1, 0], tf.sqrt, tf.zeros_like, _X),
            TypeError,
            "cond must be bool, got int32",
        ),
        (
            lambda: _G.safe_where([[True]], tf.sqrt, tf.zeros_like, _X),
            ValueError,
            r"inputs\[0\] must have the shape of cond, \(1, 1\), got \(2,\)",
        ),
        (
            lambda: _G.safe_where(_X > 0, tf.sqrt, tf.zeros_like, _X, [1, 2]),
            TypeError,
            r"inputs\[1\] must be floating-point, got int32",
        ),
        (
            lambda: _G.safe_where(_X > 0, tf.reduce_sum, tf.zeros_like, _X),
            ValueError,
            r"x_fn's result must have the shape of cond, \(2,\), got \(\)",
        ),
        (
            lambda: _G.safe_where(_X > 0, tf.sqrt, lambda v: v > 0, _X),
            TypeError,
            "y_fn must return floating-point values, got bool",
        ),
        (
            lambda: _G.safe_where(
                _X > 0, tf.sqrt, lambda v: tf.cast(v, tf.float64), _X
            ),
            TypeError,
            "x_fn and y_fn must return one dtype, got float32 and float64",
        ),
        # straight_through_round
        (
            lambda: _G.straight_through_round([1, 2]),
            TypeError,
            "x must be floating-point, got int32",
        ),
        (
            lambda: _G.straight_through_round("a"),
            TypeError,
            "x must be floating-point, got string",
        ),
        # clip_gradient
        (
            lambda: _G.clip_gradient(_X, 1.0, -1.0),
            ValueError,
            r"lo must be at most hi, and neither NaN; got lo=1.0 and hi=-1.0",
        ),
        (
            lambda: _G.clip_gradient(_X, [0.0, 3.0], [1.0, 2.0]),
            ValueError,
            "lo must be at most hi",
        ),
        (
            lambda: _G.clip_gradient(_X, np.nan, 1.0),
            ValueError,
            "lo must be at most hi, and neither NaN; got lo=nan",
        ),
        (
            lambda: _G.clip_gradient(_X, -1.0, np.nan),
            ValueError,
            "neither NaN; got lo=-1.0 and hi=nan",
        ),
        (
            lambda: _G.clip_gradient(_X, "a", 1.0),
            TypeError,
            "lo must be a real number, got string",
        ),
        (
            lambda: _G.clip_gradient(_X, -1.0, True),
            TypeError,
            "hi must be a real number, got bool",
        ),
        (
            lambda: _G.clip_gradient(_X, -1.0, 1j),
            TypeError,
            "hi must be a real number, got complex128",
        ),
        (
            lambda: _G.clip_gradient(_X, [-1.0, -1.0, -1.0], 1.0),
            ValueError,
            r"lo must be a scalar or broadcast to the shape of x, \(2,\), got shape "
            r"\(3,\)",
        ),
        (
            lambda: _G.clip_gradient(_X, -1.0, [[1.0, 1.0]]),
            ValueError,
            r"hi must be a scalar or broadcast to the shape of x",
        ),
        (
            lambda: _G.clip_gradient([1, 2], -1.0, 1.0),
            TypeError,
            "x must be floating-point, got int32",
        ),
        (lambda: _G.clip_gradient(None, -1.0, 1.0), TypeError, "x must be a tensor"),
        # softmax_cross_entropy
        (
            lambda: _G.softmax_cross_entropy([[1, 2]], [[0.0, 1.0]]),
            TypeError,
            "logits must be floating-point, got int32",
        ),
        (
            lambda: _G.softmax_cross_entropy(1.0, 1.0),
            ValueError,
            "logits must have a classes axis, got a scalar",
        ),
        (
            lambda: _G.softmax_cross_entropy(
                [[1.0, 2.0]], tf.constant([[0.0, 1.0]], tf.float64)
            ),
            TypeError,
            "labels must have the dtype of logits, float32, got float64",
        ),
        (
            lambda: _G.softmax_cross_entropy([[1.0, 2.0]], [[0.0, 1.0, 0.0]]),
            ValueError,
            r"labels must have the shape of logits, \(1, 2\), got \(1, 3\)",
        ),
        (
            lambda: _G.softmax_cross_entropy([[1.0, 2.0]], [["a", "b"]]),
            TypeError,
            "labels must be numbers",
        ),
    )
    def test_bad_arguments(self, call, error, message):
        with self.assertRaisesRegex(error, message):
            call()

    def test_good_bounds(self):
        # Ints, bounds of another float dtype, broadcasting and one-sided
        # (infinite) bounds are all fine.
        for lo, hi, expected in (
            (-1, 1, [-1.0, 0.5, 1.0]),
            (tf.constant(-1.0, tf.float64), np.float16(1), [-1.0, 0.5, 1.0]),
            ([-2.0, 0.0, -2.0], 2.0, [-2.0, 0.5, 2.0]),
            (-np.inf, 0.25, [-3.0, 0.25, 0.25]),
        ):
            with self.subTest(lo=lo, hi=hi):
                (dx,) = _grad(
                    lambda v, lo=lo, hi=hi: _G.clip_gradient(v, lo, hi),
                    [1.0, 2.0, 3.0],
                    upstream=tf.constant([-3.0, 0.5, 3.0]),
                )
                self.assertAllEqual(dx, expected)

    @parameterized.named_parameters(
        ("graph", False, False), ("jit", True, False), ("jit_hlo", True, True)
    )
    def test_run_time_checks(self, jit, hlo):
        # In a tf.function without static values or shapes, the checks run
        # with the graph (CustomOps>CheckCondition). Under jit_compile the
        # shapes are known when XLA compiles, and their checks fail the
        # compilation on either lowering; the bounds' values are checked by a
        # custom call on the CPU, and pass unchecked with the HLO lowering.
        if jit and not hlo and not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")
        spec = tf.TensorSpec(None, tf.float32)
        with xla_test_util.hlo_lowering() if hlo else contextlib.nullcontext():

            @tf.function(input_signature=[spec] * 3, jit_compile=jit)
            def clip(x, lo, hi):
                return _grad(lambda v: _G.clip_gradient(v, lo, hi), x)[0]

            @tf.function(input_signature=[spec] * 2, jit_compile=jit)
            def cross_entropy(logits, labels):
                return _G.softmax_cross_entropy(logits, labels)

            @tf.function(
                input_signature=[tf.TensorSpec(None, tf.bool), spec], jit_compile=jit
            )
            def where(cond, x):
                return _G.safe_where(cond, tf.sqrt, tf.zeros_like, x)

            ones = tf.ones([2, 3])
            self.assertAllEqual(clip(ones, -1.0, 1.0), ones)
            self.assertAllEqual(where(tf.ones([3], tf.bool), tf.ones([3])), [1, 1, 1])
            self.assertAllClose(
                cross_entropy(ones, ones / 3), tf.fill([2], np.log(3.0))
            )
            for call, message in (
                (lambda: clip(ones, tf.ones([2]), 2.0), "lo must broadcast to the"),
                (lambda: clip(ones, -1.0, tf.ones([4, 2, 3])), "hi must broadcast to"),
                (
                    lambda: cross_entropy(ones, tf.ones([2, 1])),
                    "labels must have the shape of logits",
                ),
                (
                    lambda: where(tf.ones([3], tf.bool), tf.ones([1])),
                    r"inputs\[0\] must have the shape of cond",
                ),
            ):
                with self.subTest(message=message):
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, message
                    ):
                        call()
            for bounds in ((1.0, -1.0), (np.nan, 1.0)):
                with self.subTest(bounds=bounds):
                    if hlo:
                        clip(ones, *bounds)
                        continue
                    with self.assertRaisesRegex(
                        xla_test_util.data_error()
                        if jit
                        else tf.errors.InvalidArgumentError,
                        "lo must be at most hi, and neither NaN",
                    ):
                        clip(ones, *bounds)


if __name__ == "__main__":
    tf.test.main()
