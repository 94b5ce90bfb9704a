"""Forward tests of CustomOps>MatrixMul: values, dtypes, shapes, transposes,
modes, shape inference and errors."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import test_util

import tensorflow_customops as tfco
from tensorflow_customops.python import registry
from tensorflow_customops.python.ops import load_library

_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]
# (m, k, n), including empty products and an empty inner dimension.
_SIZES = [(1, 1, 1), (3, 5, 2), (17, 33, 9), (0, 4, 3), (3, 4, 0), (2, 0, 3)]
_TOLERANCE = {tf.float16: 1e-2, tf.bfloat16: 5e-2, tf.float32: 1e-5, tf.float64: 1e-12}


def _operands(m, k, n, transpose_a, transpose_b, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, size=(k, m) if transpose_a else (m, k))
    b = rng.uniform(-1, 1, size=(n, k) if transpose_b else (k, n))
    return a, b


def _reference(a, b, transpose_a, transpose_b):
    return (a.T if transpose_a else a) @ (b.T if transpose_b else b)


class MatrixMulTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(
        dtype=_DTYPES, size=_SIZES, transpose_a=[False, True], transpose_b=[False, True]
    )
    def test_values(self, dtype, size, transpose_a, transpose_b):
        a, b = _operands(*size, transpose_a, transpose_b)
        # Round the operands to dtype first, so only the product's error counts.
        a = tf.constant(a, dtype)
        b = tf.constant(b, dtype)
        product = tfco.matrix_mul(a, b, transpose_a, transpose_b)
        self.assertEqual(product.dtype, dtype)
        self.assertEqual(product.shape, (size[0], size[2]))
        expected = _reference(
            tf.cast(a, tf.float64).numpy(),
            tf.cast(b, tf.float64).numpy(),
            transpose_a,
            transpose_b,
        )
        tol = _TOLERANCE[dtype] * max(1, size[1])
        self.assertAllClose(tf.cast(product, tf.float64), expected, rtol=tol, atol=tol)

    def test_large_product_matches_tf_matmul(self):
        a, b = _operands(300, 257, 301, False, False, seed=1)
        self.assertAllClose(
            tfco.matrix_mul(a, b), tf.matmul(a, b), rtol=1e-10, atol=1e-10
        )

    def test_repeatable(self):
        a, b = _operands(256, 513, 255, True, False, seed=2)
        a = tf.constant(a, tf.float32)
        b = tf.constant(b, tf.float32)
        first = tfco.matrix_mul(a, b, transpose_a=True).numpy()
        for _ in range(3):
            self.assertAllEqual(tfco.matrix_mul(a, b, transpose_a=True), first)

    @test_util.run_in_graph_and_eager_modes
    def test_graph_and_eager_modes(self):
        product = tfco.matrix_mul([[1.0, 2.0], [3.0, 4.0]], [[5.0], [6.0]])
        self.assertAllEqual(self.evaluate(product), [[17.0], [39.0]])

    def test_tf_function_with_unknown_shapes(self):
        fn = tf.function(
            lambda a, b: tfco.matrix_mul(a, b, transpose_b=True),
            input_signature=[tf.TensorSpec([None, None], tf.float64)] * 2,
        )
        for m, k, n in [(2, 3, 4), (5, 1, 2), (0, 3, 2)]:
            a, b = _operands(m, k, n, False, True)
            self.assertAllClose(fn(a, b), _reference(a, b, False, True))
        self.assertEqual(fn.experimental_get_tracing_count(), 1)

    @parameterized.parameters(
        ([2, 3], [3, 4], False, False, [2, 4]),
        ([3, 2], [3, 4], True, False, [2, 4]),
        ([2, 3], [4, 3], False, True, [2, 4]),
        ([None, 3], [None, None], False, False, [None, None]),
        ([None, None], [3, 5], True, True, [None, 3]),
        (None, None, False, False, [None, None]),
    )
    def test_shape_inference(self, a_shape, b_shape, ta, tb, expected):
        fn = tf.function(
            lambda a, b: tfco.matrix_mul(a, b, ta, tb)
        ).get_concrete_function(
            tf.TensorSpec(a_shape, tf.float32), tf.TensorSpec(b_shape, tf.float32)
        )
        self.assertEqual(fn.structured_outputs.shape.as_list(), expected)

    def test_shape_function_rejects_inner_mismatch(self):
        with tf.Graph().as_default():
            with self.assertRaisesRegex(
                ValueError, r"inner dimensions differ: a \[2,3\] contributes 3"
            ):
                tfco.matrix_mul(tf.zeros([2, 3]), tf.zeros([4, 5]))

    def test_shape_function_rejects_non_matrix(self):
        with tf.Graph().as_default():
            with self.assertRaisesRegex(ValueError, r"must be rank 2"):
                tfco.matrix_mul(tf.zeros([2, 3, 4]), tf.zeros([4, 5]))

    @parameterized.parameters(
        (
            [2, 3],
            [4, 5],
            False,
            False,
            r"inner dimensions differ: a \[2,3\] "
            r"contributes 3, b \[4,5\] contributes 4",
        ),
        (
            [2, 3],
            [2, 5],
            True,
            True,
            r"a \[2,3\] \(transposed\) contributes 2, "
            r"b \[2,5\] \(transposed\) contributes 5",
        ),
        ([2, 3, 1], [3, 5], False, False, r"a must be a matrix, got shape \[2,3,1\]"),
        ([2, 3], [3], False, False, r"b must be a matrix, got shape \[3\]"),
    )
    def test_kernel_errors(self, a_shape, b_shape, ta, tb, message):
        # Unknown static shapes, so the kernel's own checks run.
        fn = tf.function(
            lambda a, b: tfco.matrix_mul(a, b, ta, tb),
            input_signature=[tf.TensorSpec(None, tf.float32)] * 2,
        )
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            fn(tf.zeros(a_shape), tf.zeros(b_shape))

    @parameterized.parameters(tf.int32, tf.complex64)
    def test_bad_dtype(self, dtype):
        x = tf.zeros([2, 2], dtype=dtype)
        with self.assertRaisesRegex(
            TypeError,
            rf"^a must be float16, bfloat16, float32 or float64, got {dtype.name}$",
        ):
            tfco.matrix_mul(x, x)
        with self.assertRaisesRegex(
            (TypeError, tf.errors.InvalidArgumentError),
            r"allowed values|not in list of allowed",
        ):
            load_library.load_op_library().custom_ops_matrix_mul(a=x, b=x)

    def test_b_must_have_the_dtype_of_a(self):
        with self.assertRaisesRegex(
            TypeError, r"^b must have a's dtype, float32, got float64$"
        ):
            tfco.matrix_mul(tf.zeros([2, 2]), tf.zeros([2, 2], tf.float64))
        # Python numbers take a's dtype.
        self.assertEqual(tfco.matrix_mul(tf.ones([1, 1], tf.float64), [[2]]), 2.0)

    def test_the_fuzzer_has_a_hint(self):
        # Random shapes almost never make matching matrix products: without a
        # hint the fuzzer would reach only the op's validation.
        self.assertIn("CustomOps>MatrixMul", registry.fuzz_hints())


if __name__ == "__main__":
    tf.test.main()
