"""Tests of CustomOps>DeformableConv2d: values in every dtype and shape, graph, eager
and tf.function modes, gradients against numeric Jacobians, and argument
errors. The registry entry adds the cross-op checks: determinism, threads,
large shapes, the C++ gradient (cpp_gradients_test), fuzzing and goldens."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library

_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _reference(x, alpha, dtype):
    """alpha * x computed as the kernel does: in float32 (float64 for double),
    rounded once to dtype."""
    wide = np.float64 if dtype == tf.float64 else np.float32
    values = wide(alpha) * np.asarray(x, np.float64).astype(wide)
    return tf.cast(values, dtype).numpy()


class DeformableConv2dTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(dtype=_DTYPES, shape=[(), (0,), (7,), (3, 0, 2), (4, 5, 6)])
    def test_values(self, dtype, shape):
        x = tf.cast(np.random.default_rng(1).normal(size=shape), dtype)
        y = tfco.deformable_conv2d(x, alpha=-1.25)
        self.assertEqual(y.dtype, dtype)
        self.assertEqual(y.shape, shape)
        self.assertAllEqual(y, _reference(tf.cast(x, tf.float64), -1.25, dtype))

    def test_default_alpha_is_identity(self):
        x = tf.constant([1.5, -2.0, 0.0])
        self.assertAllEqual(tfco.deformable_conv2d(x), x)

    def test_graph_mode(self):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, shape=None)
            y = tfco.deformable_conv2d(x, alpha=2.0)
            with tf.compat.v1.Session() as sess:
                self.assertAllEqual(sess.run(y, {x: [[1.0, 2.0]]}), [[2.0, 4.0]])

    def test_tf_function_with_unknown_shape(self):
        fn = tf.function(
            lambda x: tfco.deformable_conv2d(x, alpha=0.5),
            input_signature=[tf.TensorSpec(None, tf.float64)],
        )
        concrete = fn.get_concrete_function()
        self.assertEqual(concrete.structured_outputs.shape.rank, None)
        self.assertAllEqual(fn(tf.constant([[4.0], [6.0]], tf.float64)), [[2.0], [3.0]])

    @parameterized.parameters(0.5, -3.0)
    def test_gradient_matches_numeric_jacobian(self, alpha):
        x = tf.constant(np.random.default_rng(2).normal(size=(2, 3)))
        theoretical, numerical = tf.test.compute_gradient(
            lambda x: tfco.deformable_conv2d(x, alpha=alpha), [x]
        )
        self.assertAllClose(theoretical, numerical, rtol=1e-7, atol=1e-7)
        self.assertAllClose(theoretical[0], alpha * np.eye(6))

    def test_second_order_gradient(self):
        x = tf.constant([2.0, 3.0], tf.float64)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.reduce_sum(tfco.deformable_conv2d(x * x, alpha=3.0))
            dx = inner.gradient(y, x)
        self.assertAllEqual(dx, [12.0, 18.0])
        self.assertAllEqual(outer.gradient(dx, x), [6.0, 6.0])

    def test_alpha_errors(self):
        with self.assertRaisesRegex(ValueError, "alpha must be finite, got nan"):
            tfco.deformable_conv2d([1.0], alpha=float("nan"))
        with self.assertRaisesRegex(TypeError, "alpha must be a Python number"):
            tfco.deformable_conv2d([1.0], alpha="2")
        with self.assertRaisesRegex(TypeError, "alpha must be a Python number"):
            tfco.deformable_conv2d([1.0], alpha=True)

    def test_kernel_rejects_non_finite_alpha(self):
        raw = load_library.load_op_library().custom_ops_deformable_conv2d
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, "alpha must be finite, got inf"
        ):
            raw(x=[1.0], alpha=float("inf"))

    def test_integer_input_is_rejected(self):
        with self.assertRaisesRegex(TypeError, "x must be float16.*got int32"):
            tfco.deformable_conv2d([1, 2])


if __name__ == "__main__":
    tf.test.main()
