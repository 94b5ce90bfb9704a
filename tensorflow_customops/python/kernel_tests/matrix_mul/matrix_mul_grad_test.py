"""Gradient tests of CustomOps>MatrixMul in all four transpose cases: the
Python gradient against the numeric Jacobian, and the C++ (FunctionDefHelper)
gradient against the Python one and the numeric Jacobian."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import gradient_test_util

_CASES = [(False, False), (False, True), (True, False), (True, True)]


def _operands(ta, tb, m=2, k=3, n=4, seed=0):
    # Distinct m, k and n, so that a gradient with the wrong dimensions fails
    # by shape, not just by value.
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(k, m) if ta else (m, k))
    b = rng.normal(size=(n, k) if tb else (k, n))
    return a, b


def _attrs(dtype, ta, tb):
    return {"T": dtype, "transpose_a": ta, "transpose_b": tb}


class MatrixMulGradTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.parameters(*_CASES)
    def test_python_gradient_matches_numeric_jacobian(self, ta, tb):
        a, b = _operands(ta, tb)
        theoretical, numerical = tf.test.compute_gradient(
            lambda x, y: tfco.matrix_mul(x, y, ta, tb),
            [tf.constant(a), tf.constant(b)],
        )
        for t, n in zip(theoretical, numerical):
            self.assertAllClose(t, n, rtol=1e-7, atol=1e-7)

    @parameterized.parameters(*_CASES)
    def test_python_gradient_matches_tf_matmul(self, ta, tb):
        a, b = (tf.constant(v) for v in _operands(ta, tb, seed=1))
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([a, b])
            ours = tfco.matrix_mul(a, b, ta, tb)
            theirs = tf.matmul(a, b, transpose_a=ta, transpose_b=tb)
        upstream = tf.random.stateless_normal(ours.shape, [1, 2], dtype=tf.float64)
        self.assertAllClose(
            tape.gradient(ours, [a, b], output_gradients=upstream),
            tape.gradient(theirs, [a, b], output_gradients=upstream),
        )

    @parameterized.product(
        case=_CASES, dtype=[tf.float16, tf.bfloat16, tf.float32, tf.float64]
    )
    def test_cpp_gradient_equals_python_gradient(self, case, dtype):
        ta, tb = case
        a, b = _operands(ta, tb, seed=2)
        dc = np.random.default_rng(3).normal(size=(2, 4))
        python_grads, cpp_grads = gradient_test_util.cpp_and_python_gradients(
            lambda x, y: tfco.matrix_mul(x, y, ta, tb),
            "CustomOps>MatrixMul",
            [a, b],
            [dc],
            _attrs(dtype, ta, tb),
            dtype,
        )
        for python_grad, cpp_grad, operand in zip(python_grads, cpp_grads, [a, b]):
            self.assertEqual(cpp_grad.shape, operand.shape)
            self.assertEqual(cpp_grad.dtype, python_grad.dtype)
            self.assertAllEqual(cpp_grad, python_grad)

    @parameterized.parameters(*_CASES)
    def test_cpp_gradient_matches_numeric_jacobian(self, ta, tb):
        a, b = _operands(ta, tb, seed=4)
        ((cpp_a, cpp_b),) = gradient_test_util.cpp_jacobians(
            "CustomOps>MatrixMul", [a, b], [(2, 4)], _attrs(tf.float64, ta, tb)
        )
        _, numerical = tf.test.compute_gradient(
            lambda x, y: tfco.matrix_mul(x, y, ta, tb),
            [tf.constant(a), tf.constant(b)],
        )
        self.assertAllClose(cpp_a, numerical[0], rtol=1e-7, atol=1e-7)
        self.assertAllClose(cpp_b, numerical[1], rtol=1e-7, atol=1e-7)

    def test_gradient_in_tf_function_with_unknown_shapes(self):
        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)] * 2)
        def grads(a, b):
            with tf.GradientTape() as tape:
                tape.watch([a, b])
                c = tfco.matrix_mul(a, b, transpose_a=True)
            return tape.gradient(c, [a, b])

        a, b = _operands(True, False, seed=5)
        da, db = grads(tf.constant(a, tf.float32), tf.constant(b, tf.float32))
        # With a ones upstream: dA = B 1^T and dB = A 1.
        self.assertAllClose(da, b @ np.ones((4, 2)), rtol=1e-5)
        self.assertAllClose(db, a @ np.ones((2, 4)), rtol=1e-5)

    def test_empty_inner_dimension_gradient(self):
        a = tf.zeros([2, 0])
        b = tf.zeros([0, 3])
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            c = tfco.matrix_mul(a, b)
        da, db = tape.gradient(c, [a, b])
        self.assertEqual(da.shape, (2, 0))
        self.assertEqual(db.shape, (0, 3))


if __name__ == "__main__":
    tf.test.main()
