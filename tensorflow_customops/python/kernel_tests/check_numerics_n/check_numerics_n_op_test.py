"""Tests of CustomOps>CheckNumericsN: pass-through of mixed dtypes, the error
naming index, message and kind, modes (XLA included), and the Python and C++
gradients."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import test_util

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import gradient_test_util, xla_test_util

_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]


class CheckNumericsNTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.parameters([()], [(0,)], [(5,)], [(2, 0, 3)], [(100003,)])
    def test_passes_mixed_dtypes_through(self, shape):
        rng = np.random.default_rng(0)
        tensors = [tf.constant(rng.normal(size=shape), d) for d in _DTYPES]
        checked = tfco.check_numerics_n(tensors, "ok")
        self.assertLen(checked, len(tensors))
        for x, y in zip(tensors, checked):
            self.assertEqual(y.dtype, x.dtype)
            self.assertAllEqual(y, x)

    @parameterized.product(
        dtype=_DTYPES,
        case=[
            ([np.nan], "NaN"),
            ([np.inf], "Inf"),
            ([-np.inf], "Inf"),
            ([np.nan, -np.inf], "NaN and Inf"),
        ],
    )
    def test_error_names_index_message_and_kind(self, dtype, case):
        bad, kind = case
        good = tf.ones([3], dtype)
        # A large tensor, so the CPU kernel splits the scan into shards.
        values = np.ones(200003)
        values[[17, 150001][: len(bad)]] = bad
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            rf"in layer 7: CheckNumericsN found {kind} in tensors\[1\] of 3",
        ):
            tfco.check_numerics_n(
                [good, tf.constant(values, dtype), good], "in layer 7"
            )

    def test_first_bad_tensor_is_reported(self):
        tensors = [tf.constant([1.0]), tf.constant([np.inf]), tf.constant([np.nan])]
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"found Inf in tensors\[1\] of 3"
        ):
            tfco.check_numerics_n(tensors, "m")

    @test_util.run_in_graph_and_eager_modes
    def test_graph_and_eager_modes(self):
        (y,) = tfco.check_numerics_n([tf.constant([1.0, 2.0])], "ok")
        self.assertAllEqual(self.evaluate(y), [1.0, 2.0])

    def test_tf_function_with_unknown_shapes(self):
        fn = tf.function(
            lambda x, y: tfco.check_numerics_n([x, y], "fn"),
            input_signature=[
                tf.TensorSpec(None, tf.float32),
                tf.TensorSpec([None], tf.float64),
            ],
        )
        x, y = fn(tf.ones([2, 2]), tf.zeros([0], tf.float64))
        self.assertAllEqual(x, tf.ones([2, 2]))
        self.assertEqual(y.shape, (0,))
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"fn: CheckNumericsN found NaN in tensors\[1\]",
        ):
            fn(tf.ones([1]), tf.constant([np.nan], tf.float64))
        self.assertEqual(fn.experimental_get_tracing_count(), 1)

    def test_xla_checks_as_the_kernel_does(self):
        if not xla_test_util.custom_calls():
            self.skipTest("compiles only to a custom call (docs/xla.md)")

        @tf.function(jit_compile=True)
        def fn(x, y):
            a, b = tfco.check_numerics_n([x * 2, y], "jit")
            return a + 1, b

        x = tf.constant([1.0, 2.0], tf.bfloat16)
        y = tf.constant(np.arange(200003), tf.float64)
        a, b = fn(x, y)
        self.assertAllEqual(a, [3.0, 5.0])
        self.assertAllEqual(b, y)
        for bad, kind in ((np.nan, "NaN"), (-np.inf, "Inf")):
            values = y.numpy().copy()
            values[150001] = bad
            with self.assertRaisesRegex(
                xla_test_util.data_error(),
                rf"jit: CheckNumericsN found {kind} in tensors\[1\] of 2",
            ):
                fn(x, tf.constant(values))

    def test_shape_inference(self):
        fn = tf.function(
            lambda x, y: tfco.check_numerics_n([x, y], "m")
        ).get_concrete_function(
            tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec(None, tf.float16)
        )
        x, y = fn.structured_outputs
        self.assertEqual(x.shape.as_list(), [None, 3])
        self.assertEqual(y.shape, tf.TensorShape(None))

    def test_single_tensor_is_a_type_error(self):
        for tensors in (tf.ones([3]), np.ones([3])):
            with self.assertRaisesRegex(
                TypeError, r"tensors must be a list of tensors, got .*wrap a single"
            ):
                tfco.check_numerics_n(tensors, "x")

    def test_message_must_be_a_string(self):
        with self.assertRaisesRegex(
            TypeError, r"check_numerics_n: message must be a string, got bytes"
        ):
            tfco.check_numerics_n([tf.ones([2])], b"m")

    def test_empty_list(self):
        with self.assertRaisesRegex(ValueError, r"tensors must not be empty"):
            tfco.check_numerics_n([], "m")

    @parameterized.parameters(tf.int32, tf.complex64, tf.bool)
    def test_bad_dtype(self, dtype):
        with self.assertRaisesRegex(
            TypeError,
            r"check_numerics_n: tensors\[1\] must be float16, bfloat16, float32 or "
            rf"float64, got {dtype.name}$",
        ):
            tfco.check_numerics_n([tf.ones([2]), tf.zeros([2], dtype)], "m")
        with self.assertRaisesRegex(
            TypeError, r"check_numerics_n: tensors\[0\] must be a tensor"
        ):
            tfco.check_numerics_n([[1.0, "a"]], "m")

    def test_python_gradient_passes_through(self):
        x = tf.constant([1.0, 2.0])
        y = tf.constant([3.0], tf.float64)
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            cx, cy = tfco.check_numerics_n([x, y], "m")
            loss = tf.reduce_sum(cx * 3.0) + tf.cast(tf.reduce_sum(cy * cy), tf.float32)
        dx, dy = tape.gradient(loss, [x, y])
        self.assertAllEqual(dx, [3.0, 3.0])
        self.assertAllEqual(dy, [6.0])

    def test_python_gradient_matches_numeric_jacobian(self):
        xs = [tf.constant(np.arange(6.0).reshape(2, 3)), tf.constant([0.5])]
        for output in range(2):
            theoretical, numerical = tf.test.compute_gradient(
                lambda a, b, k=output: tfco.check_numerics_n([a, b], "m")[k], xs
            )
            for t, n in zip(theoretical, numerical):
                self.assertAllClose(t, n, rtol=1e-7, atol=1e-7)

    def test_cpp_gradient_equals_python_gradient(self):
        dtypes = [tf.float32, tf.float64]
        with tf.Graph().as_default():
            xs = [tf.constant([1.0, 2.0], d) for d in dtypes]
            dys = [tf.constant([3.0, -4.0], d) for d in dtypes]
            ys = tfco.check_numerics_n(xs, "m")
            python_dxs = tf.gradients(ys, xs, grad_ys=dys)
            cpp_dxs = gradient_test_util.symbolic_gradient(
                "CustomOps>CheckNumericsN", xs, dys, {"T": dtypes, "message": "m"}
            )
            with tf.compat.v1.Session() as sess:
                python_values, cpp_values = sess.run([python_dxs, cpp_dxs])
        for python_value, cpp_value, d in zip(python_values, cpp_values, dtypes):
            self.assertEqual(cpp_value.dtype, d.as_numpy_dtype)
            self.assertAllEqual(cpp_value, python_value)
            self.assertAllEqual(cpp_value, [3.0, -4.0])

    def test_cpp_gradient_matches_numeric_jacobian(self):
        x_values = [np.arange(4.0).reshape(2, 2), np.array([0.5, 1.5])]
        cpp = gradient_test_util.cpp_jacobians(
            "CustomOps>CheckNumericsN",
            x_values,
            [(2, 2), (2,)],
            {"T": [tf.float64, tf.float64], "message": "m"},
        )
        for output in range(2):
            _, numerical = tf.test.compute_gradient(
                lambda a, b, k=output: tfco.check_numerics_n([a, b], "m")[k],
                [tf.constant(v) for v in x_values],
            )
            for c, n in zip(cpp[output], numerical):
                self.assertAllClose(c, n, rtol=1e-7, atol=1e-7)


if __name__ == "__main__":
    tf.test.main()
