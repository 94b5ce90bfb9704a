"""Gradient tests of CustomOps>ZeroOut: the Python gradient against the numeric
Jacobian, and the C++ (FunctionDefHelper) gradient against the Python one."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import gradient_test_util


class ZeroOutGradTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.parameters([()], [(1,)], [(5,)], [(2, 3)], [(2, 3, 2)])
    def test_python_gradient_matches_numeric_jacobian(self, shape):
        x = tf.constant(np.random.default_rng(1).normal(size=shape))
        theoretical, numerical = tf.test.compute_gradient(tfco.zero_out, [x])
        self.assertAllClose(theoretical, numerical, rtol=1e-7, atol=1e-7)
        # The Jacobian is a single 1 at (0, 0): a nonzero check guards against
        # comparing two all-zero matrices.
        self.assertEqual(np.count_nonzero(theoretical[0]), 1)

    @parameterized.parameters(tf.float16, tf.bfloat16, tf.float32, tf.float64)
    def test_gradient_is_zero_out_of_upstream(self, dtype):
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]], dtype=dtype)
        upstream = tf.constant([[5.0, 6.0], [7.0, 8.0]], dtype=dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tfco.zero_out(x)
        grad = tape.gradient(y, x, output_gradients=upstream)
        self.assertEqual(grad.dtype, dtype)
        self.assertAllEqual(grad, [[5.0, 0.0], [0.0, 0.0]])

    @parameterized.parameters(0, 2, 6)
    def test_python_gradient_with_keep_matches_numeric_jacobian(self, keep):
        x = tf.constant(np.random.default_rng(4).normal(size=(2, 3)))
        theoretical, numerical = tf.test.compute_gradient(
            lambda x: tfco.zero_out(x, keep=keep), [x]
        )
        self.assertAllClose(theoretical, numerical, rtol=1e-7, atol=1e-7)
        self.assertEqual(np.count_nonzero(theoretical[0]), keep)

    def test_second_order_gradient(self):
        x = tf.constant([2.0, 3.0], dtype=tf.float64)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.reduce_sum(tfco.zero_out(x * x))
            dx = inner.gradient(y, x)
        self.assertAllEqual(dx, [4.0, 0.0])
        self.assertAllEqual(outer.gradient(dx, x), [2.0, 0.0])

    def test_integer_input_has_no_gradient(self):
        x = tf.constant([1, 2, 3])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tfco.zero_out(x)
        self.assertIsNone(tape.gradient(y, x))

    def test_gradient_in_tf_function_with_unknown_shape(self):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
        def grad_fn(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tfco.zero_out(x) * 3.0
            return tape.gradient(y, x)

        self.assertAllEqual(grad_fn(tf.ones([2, 2])), [[3.0, 0.0], [0.0, 0.0]])
        self.assertAllEqual(grad_fn(tf.ones([3])), [3.0, 0.0, 0.0])

    @parameterized.parameters(tf.float16, tf.bfloat16, tf.float32, tf.float64)
    def test_cpp_gradient_equals_python_gradient(self, dtype):
        rng = np.random.default_rng(2)
        x_value = rng.normal(size=(3, 4))
        dy_value = rng.normal(size=(3, 4))
        (python_dx,), (cpp_dx,) = gradient_test_util.cpp_and_python_gradients(
            tfco.zero_out,
            "CustomOps>ZeroOut",
            [x_value],
            [dy_value],
            {"T": dtype},
            dtype,
        )
        self.assertEqual(cpp_dx.dtype, python_dx.dtype)
        self.assertAllEqual(cpp_dx, python_dx)
        expected = np.zeros_like(dy_value)
        expected[0, 0] = dy_value[0, 0]
        self.assertAllClose(cpp_dx, expected, rtol=1e-2)

    @parameterized.parameters(0, 3, 20)
    def test_cpp_gradient_with_keep_equals_python_gradient(self, keep):
        rng = np.random.default_rng(5)
        x_value = rng.normal(size=(3, 4))
        dy_value = rng.normal(size=(3, 4))
        with tf.Graph().as_default():
            x = tf.constant(x_value)
            dy = tf.constant(dy_value)
            y = tfco.zero_out(x, keep=keep)
            (python_dx,) = tf.gradients(y, x, grad_ys=dy)
            (cpp_dx,) = gradient_test_util.symbolic_gradient_of(y.op, [dy])
            with tf.compat.v1.Session() as sess:
                python_value, cpp_value = sess.run([python_dx, cpp_dx])
        expected = dy_value.ravel().copy()
        expected[keep:] = 0
        self.assertAllEqual(cpp_value, python_value)
        self.assertAllEqual(cpp_value, expected.reshape(3, 4))

    def test_cpp_gradient_matches_numeric_jacobian(self):
        x_value = np.random.default_rng(3).normal(size=(2, 3))
        ((cpp,),) = gradient_test_util.cpp_jacobians(
            "CustomOps>ZeroOut", [x_value], [x_value.shape], {"T": tf.float64}
        )
        _, numerical = tf.test.compute_gradient(tfco.zero_out, [tf.constant(x_value)])
        self.assertAllClose(cpp, numerical[0], rtol=1e-7, atol=1e-7)


if __name__ == "__main__":
    tf.test.main()
