"""Forward tests of CustomOps>ZeroOut: values, dtypes, shapes, modes, errors."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import test_util

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library

_DTYPES = [
    tf.int32,
    tf.int64,
    tf.float16,
    tf.bfloat16,
    tf.float32,
    tf.float64,
    tf.int8,
    tf.uint8,
]
_SHAPES = [(), (1,), (7,), (2, 3), (3, 1, 4), (2, 0, 3), (0,)]


def _reference(x):
    """NumPy reference: first element kept, the rest zero."""
    x = np.asarray(x)
    out = np.zeros_like(x)
    if x.size:
        out.flat[0] = x.flat[0]
    return out


def _random(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.integers(0 if dtype.is_unsigned else -100, 100, size=shape)
    # Avoid zeros so that a kernel that zeroes everything cannot pass.
    values[values == 0] = 1
    return tf.constant(values, dtype=dtype)


class ZeroOutTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(dtype=_DTYPES, shape=_SHAPES)
    def test_values(self, dtype, shape):
        x = _random(shape, dtype)
        y = tfco.zero_out(x)
        self.assertEqual(y.dtype, dtype)
        self.assertEqual(y.shape, x.shape)
        self.assertAllEqual(y, _reference(x.numpy()))

    @parameterized.parameters(0, 1, 2, 5, 6, 100)
    def test_keep(self, keep):
        x = _random((2, 3), tf.float32)
        expected = x.numpy().ravel()
        expected[keep:] = 0
        self.assertAllEqual(tfco.zero_out(x, keep=keep), expected.reshape(2, 3))

    def test_keep_large_input_uses_every_shard(self):
        n = 3_000_017
        y = tfco.zero_out(tf.ones([n], dtype=tf.int32), keep=n - 5)
        self.assertEqual(int(tf.math.count_nonzero(y)), n - 5)
        self.assertAllEqual(y[-6:], [1, 0, 0, 0, 0, 0])

    def test_negative_keep(self):
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, "keep must be >= 0, got -1"
        ):
            self.evaluate(tfco.zero_out([1, 2], keep=-1))

    def test_keep_must_be_a_python_int(self):
        # A float would be truncated and a tensor taken in eager mode only.
        for keep in (2.9, True, np.float32(2.0), tf.constant(2)):
            with self.subTest(keep=keep):
                message = r"keep must be a Python int \(it sets the op's attribute"
                with self.assertRaisesRegex(TypeError, "^" + message):
                    tfco.zero_out([1, 2, 3], keep=keep)
                with self.assertRaisesRegex(TypeError, message):
                    tf.function(lambda k: tfco.zero_out([1, 2, 3], keep=k))(keep)
        with self.assertRaisesRegex(ValueError, r"^keep must be below 2\*\*63, got"):
            tfco.zero_out([1, 2, 3], keep=2**63)
        self.assertAllEqual(tfco.zero_out([1, 2, 3], keep=np.int64(2)), [1, 2, 0])

    def test_dynamic_dimension_under_jit_is_refused(self):
        # The flat index would count the padding past a dynamic size.
        rows = tf.constant(np.arange(12.0).reshape(3, 4))
        keep = tf.constant([True, True, False, True])

        def masked():
            return tfco.zero_out(tf.boolean_mask(rows, keep, axis=1), keep=4)

        self.assertAllEqual(masked(), [[0, 1, 3], [4, 0, 0], [0, 0, 0]])
        with self.assertRaisesRegex(
            tf.errors.UnimplementedError,
            r"CustomOps>ZeroOut under XLA: dimension 1 of to_zero is dynamic "
            r"\(at most 4, as from tf.boolean_mask or tf.where\), and to_zero "
            r"must have a static shape",
        ):
            tf.function(masked, jit_compile=True)()

    def test_default_dtype_from_python_list(self):
        y = tfco.zero_out([[1, 2], [3, 4]])
        self.assertEqual(y.dtype, tf.int32)
        self.assertAllEqual(y, [[1, 0], [0, 0]])

    def test_scalar(self):
        self.assertAllEqual(tfco.zero_out(tf.constant(5.5)), 5.5)

    def test_special_values(self):
        y = tfco.zero_out(tf.constant([np.nan, np.inf, -np.inf, np.nan]))
        self.assertTrue(np.isnan(y[0]))
        self.assertAllEqual(y[1:], [0.0, 0.0, 0.0])
        self.assertAllEqual(
            tfco.zero_out(tf.constant([-np.inf, np.nan])), [-np.inf, 0.0]
        )

    @parameterized.parameters(tf.int32, tf.float32, tf.bfloat16)
    def test_large_input_uses_every_shard(self, dtype):
        # Large enough for the CPU kernel to split the work across threads.
        n = 3_000_017
        x = tf.ones([n], dtype=dtype) * tf.cast(3, dtype)
        y = tfco.zero_out(x)
        self.assertEqual(float(y[0]), 3.0)
        self.assertEqual(int(tf.math.count_nonzero(y)), 1)

    def test_input_is_not_modified(self):
        # The kernel may reuse the input buffer only when nothing else reads it.
        @tf.function
        def fn(x):
            doubled = x * 2.0
            return tfco.zero_out(doubled), doubled

        zeroed, doubled = fn(tf.constant([1.0, 2.0, 3.0]))
        self.assertAllEqual(zeroed, [2.0, 0.0, 0.0])
        self.assertAllEqual(doubled, [2.0, 4.0, 6.0])

    @test_util.run_in_graph_and_eager_modes
    def test_graph_and_eager_modes(self):
        x = tf.constant([[5, 6], [7, 8]], dtype=tf.int64)
        self.assertAllEqual(self.evaluate(tfco.zero_out(x)), [[5, 0], [0, 0]])

    @test_util.run_deprecated_v1
    def test_v1_session_with_placeholder(self):
        x = tf.compat.v1.placeholder(tf.float32, shape=None)
        y = tfco.zero_out(x)
        self.assertEqual(y.op.type, "CustomOps>ZeroOut")
        with self.session() as sess:
            out = sess.run(y, {x: [[4.0, 5.0], [6.0, 7.0]]})
        self.assertAllEqual(out, [[4.0, 0.0], [0.0, 0.0]])

    @parameterized.parameters(
        ([None], [None]),
        ([None, 3], [None, 3]),
        ([2, None, 4], [2, None, 4]),
        (None, None),
    )
    def test_shape_inference(self, input_shape, expected):
        fn = tf.function(tfco.zero_out).get_concrete_function(
            tf.TensorSpec(input_shape, tf.float32)
        )
        self.assertEqual(fn.structured_outputs.shape, tf.TensorShape(expected))

    def test_tf_function_with_unknown_shapes(self):
        fn = tf.function(
            tfco.zero_out, input_signature=[tf.TensorSpec(None, tf.float64)]
        )
        for shape in [(), (4,), (2, 5), (3, 0), (2, 2, 2)]:
            x = _random(shape, tf.float64, seed=len(shape))
            self.assertAllEqual(fn(x), _reference(x.numpy()))
        # One trace serves every shape.
        self.assertEqual(fn.experimental_get_tracing_count(), 1)

    def test_op_name(self):
        @tf.function
        def fn(x):
            return tfco.zero_out(x, name="my_zero_out")

        graph = fn.get_concrete_function(tf.TensorSpec([2], tf.int32)).graph
        op = graph.get_operation_by_name("my_zero_out")
        self.assertEqual(op.type, "CustomOps>ZeroOut")

    @parameterized.parameters(tf.bool, tf.string, tf.uint16, tf.complex64, tf.int16)
    def test_bad_dtype(self, dtype):
        x = tf.zeros([2], dtype=dtype)
        with self.assertRaisesRegex(
            TypeError,
            r"^to_zero must be int32, int64, float32, float64, float16, bfloat16, "
            rf"int8 or uint8, got {dtype.name}$",
        ):
            tfco.zero_out(x)
        with self.assertRaisesRegex(
            (TypeError, tf.errors.InvalidArgumentError),
            r"allowed values|not in list of allowed",
        ):
            load_library.load_op_library().custom_ops_zero_out(to_zero=x)

    def test_bad_dtype_in_graph(self):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.bool, [2])
            with self.assertRaisesRegex(TypeError, r"to_zero must be .*, got bool"):
                tfco.zero_out(x)
            with self.assertRaisesRegex(TypeError, r"allowed values"):
                load_library.load_op_library().custom_ops_zero_out(to_zero=x)


if __name__ == "__main__":
    tf.test.main()
