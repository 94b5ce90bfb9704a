"""Tests of tfco.gradients: each utility against numeric gradients, and each
shown to fix the failure it exists for."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco


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


if __name__ == "__main__":
    tf.test.main()
