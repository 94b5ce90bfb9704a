"""Forward tests of CustomOps>ClipByGlobalNorm against tf.clip_by_global_norm:
values, dtypes, shapes, inf and NaN, modes, errors, and the same bits for any
thread count."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import test_util

import tensorflow_customops as tfco

_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]
_TOLERANCE = {tf.float16: 2e-3, tf.bfloat16: 2e-2, tf.float32: 1e-6, tf.float64: 1e-12}
_SHAPE_LISTS = [
    [()],
    [(3,)],
    [(2, 3), (4,), ()],
    [(0,), (5, 2), (2, 0, 3)],
    [(0,)],
    [(40000,), (3, 7)],  # several fixed-size chunks in one tensor
]


def _tensors(shapes, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=s) * scale, dtype=dtype) for s in shapes]


def _lane_sum(values):
    """16 double lanes, each summed in element order; the tail goes to lane 0;
    then lanes are added pairwise (l += l + 8, l += l + 4, ...)."""
    lanes = np.zeros(16)
    full = len(values) // 16 * 16
    for row in values[:full].reshape(-1, 16):
        lanes = lanes + row
    for v in values[full:]:
        lanes[0] += v
    width = 8
    while width:
        lanes[:width] = lanes[:width] + lanes[width : 2 * width]
        width //= 2
    return lanes[0]


def _documented_norm(t_list, chunk=1 << 14):
    squares = [x**2 for x in t_list]
    total = 0.0
    chunk_sum, filled = 0.0, 0
    for sq in squares:
        begin = 0
        while begin < len(sq):
            if filled == chunk:
                total += chunk_sum
                chunk_sum, filled = 0.0, 0
            end = min(len(sq), begin + chunk - filled)
            chunk_sum += _lane_sum(sq[begin:end])
            filled += end - begin
            begin = end
    total += chunk_sum
    return np.sqrt(total)


class ClipByGlobalNormTest(tf.test.TestCase, parameterized.TestCase):
    def assert_matches_tf(self, t_list, clip_norm, dtype):
        clipped, norm = tfco.clip_by_global_norm(t_list, clip_norm)
        expected, expected_norm = tf.clip_by_global_norm(t_list, clip_norm)
        tol = _TOLERANCE[dtype]
        self.assertEqual(norm.dtype, dtype)
        self.assertAllClose(norm, expected_norm, rtol=tol, atol=tol)
        self.assertLen(clipped, len(t_list))
        for ours, theirs in zip(clipped, expected):
            self.assertEqual(ours.dtype, dtype)
            self.assertEqual(ours.shape, theirs.shape)
            self.assertAllClose(ours, theirs, rtol=tol, atol=tol)

    @parameterized.product(
        dtype=_DTYPES, shapes=_SHAPE_LISTS, clip_norm=[0.5, 3.0, 1e4]
    )
    def test_matches_tf(self, dtype, shapes, clip_norm):
        self.assert_matches_tf(_tensors(shapes, dtype), clip_norm, dtype)

    @parameterized.parameters(tf.float32, tf.float64)
    def test_two_hundred_tensors(self, dtype):
        rng = np.random.default_rng(5)
        shapes = [(int(rng.integers(0, 300)),) for _ in range(200)]
        self.assert_matches_tf(_tensors(shapes, dtype), 1.0, dtype)

    @parameterized.product(dtype=_DTYPES, clip_norm=[0.5, 1e4])
    def test_chunks_spanning_tensors(self, dtype, clip_norm):
        # About 25 chunks, most spanning several tensors, run on the thread
        # pool. Scaled down so that TensorFlow's float16 sum does not overflow.
        shapes = [(1000 + 37 * i,) for i in range(120)] + [(0,), (3, 5)]
        self.assert_matches_tf(_tensors(shapes, dtype, scale=0.1), clip_norm, dtype)

    def test_sum_order_is_the_same_on_every_cpu(self):
        # The kernel picks AVX-512, AVX2 or baseline code by the CPU it runs
        # on. Whichever runs, the global norm must have the bits of the one
        # documented order (clip_by_global_norm_op.cc), emulated here in
        # numpy: chunks of 2^14 elements of the tensors taken as one sequence;
        # in each tensor's piece of a chunk, 16 double lanes summed in element
        # order, then halved pairwise; pieces, then chunks, added in order.
        rng = np.random.default_rng(11)
        t_list = []
        for n in [40000, 3, 0, 16385, 5000, 77, 20000]:
            # float64 values near 1 and a few of 1e8: squares of 1e16 swallow
            # the small ones unevenly, so any other order (8 lanes, chunks of
            # 2^13, numpy's sum) gives other bits of the norm.
            x = rng.uniform(0.5, 1.5, size=n)
            x[rng.integers(0, max(n, 1), size=n // 500)] = 1e8
            t_list.append(x)
        _, norm = tfco.clip_by_global_norm(t_list, 1.0)
        self.assertEqual(norm.numpy().tobytes(), _documented_norm(t_list).tobytes())

    @parameterized.parameters(
        [np.inf], [-np.inf], [np.nan], [np.inf, np.nan], [np.inf, -np.inf]
    )
    def test_inf_and_nan_like_tf(self, *bad):
        # An inf or NaN anywhere gives an inf or NaN norm and all-NaN outputs.
        t_list = [tf.constant([1.0, 2.0]), tf.constant(list(bad) + [3.0])]
        clipped, norm = tfco.clip_by_global_norm(t_list, 1.0)
        expected, expected_norm = tf.clip_by_global_norm(t_list, 1.0)
        self.assertAllEqual(norm, expected_norm)
        for ours, theirs in zip(clipped, expected):
            self.assertAllEqual(np.isnan(ours), np.isnan(theirs))
            self.assertTrue(np.all(np.isnan(ours)))

    @parameterized.parameters(0.0, -1.0, np.inf, np.nan)
    def test_unusual_clip_norms_like_tf(self, clip_norm):
        for t_list in [[tf.constant([3.0, 4.0])], [tf.zeros([2])]]:
            clipped, norm = tfco.clip_by_global_norm(t_list, clip_norm)
            expected, expected_norm = tf.clip_by_global_norm(t_list, clip_norm)
            self.assertAllEqual(norm, expected_norm)
            self.assertAllEqual(clipped[0], expected[0])

    def test_no_overflow_of_the_sum_of_squares(self):
        # 300**2 overflows float16; the norm is accumulated in double.
        clipped, norm = tfco.clip_by_global_norm(
            [tf.constant([300.0, 400.0], tf.float16)], 1.0
        )
        self.assertEqual(float(norm), 500.0)
        self.assertAllClose(clipped[0], [0.6, 0.8], rtol=1e-3)

    def test_inputs_are_not_modified(self):
        @tf.function
        def fn(x):
            doubled = x * 2.0
            clipped, _ = tfco.clip_by_global_norm([doubled], 1.0)
            return clipped[0], doubled

        clipped, doubled = fn(tf.constant([3.0, 4.0]))
        self.assertAllClose(clipped, [0.6, 0.8])
        self.assertAllEqual(doubled, [6.0, 8.0])

    @test_util.run_in_graph_and_eager_modes
    def test_graph_and_eager_modes(self):
        clipped, norm = tfco.clip_by_global_norm(
            [tf.constant([3.0]), tf.constant([[4.0]])], 2.5
        )
        clipped, norm = self.evaluate([clipped, norm])
        self.assertAllClose(clipped[0], [1.5])
        self.assertAllClose(clipped[1], [[2.0]])
        self.assertAllClose(norm, 5.0)

    def test_tf_function_with_unknown_shapes(self):
        fn = tf.function(
            lambda x, y, c: tfco.clip_by_global_norm([x, y], c),
            input_signature=[
                tf.TensorSpec(None, tf.float32),
                tf.TensorSpec([None, 2], tf.float32),
                tf.TensorSpec([], tf.float32),
            ],
        )
        for x_shape, rows in [((3,), 2), ((), 0), ((2, 2, 2), 5)]:
            x, y = _tensors([x_shape, (rows, 2)], tf.float32, seed=rows)
            (cx, cy), norm = fn(x, y, tf.constant(1.0))
            (ex, ey), expected_norm = tf.clip_by_global_norm([x, y], 1.0)
            self.assertAllClose(cx, ex)
            self.assertAllClose(cy, ey)
            self.assertAllClose(norm, expected_norm)
        self.assertEqual(fn.experimental_get_tracing_count(), 1)

    def test_shape_inference(self):
        fn = tf.function(
            lambda x, y: tfco.clip_by_global_norm([x, y], 1.0)
        ).get_concrete_function(
            tf.TensorSpec([2, None], tf.float32), tf.TensorSpec(None, tf.float32)
        )
        (cx, cy), norm = fn.structured_outputs
        self.assertEqual(cx.shape.as_list(), [2, None])
        self.assertEqual(cy.shape, tf.TensorShape(None))
        self.assertEqual(norm.shape, ())

    def test_clip_norm_must_be_scalar(self):
        fn = tf.function(
            lambda x, c: tfco.clip_by_global_norm([x], c),
            input_signature=[tf.TensorSpec(None, tf.float32)] * 2,
        )
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"ClipByGlobalNorm: clip_norm must be a scalar, got shape \[2\]",
        ):
            fn(tf.ones([3]), tf.ones([2]))
        with tf.Graph().as_default():
            with self.assertRaisesRegex(ValueError, r"must be rank 0"):
                tfco.clip_by_global_norm([tf.ones([3])], tf.ones([2]))

    def test_none_entries_as_tf(self):
        # Variables without a gradient give None: skipped, as TensorFlow does.
        t_list = [None, tf.constant([3.0, 0.0]), None, tf.constant([[4.0]])]
        clipped, norm = tfco.clip_by_global_norm(t_list, 2.0)
        expected, expected_norm = tf.clip_by_global_norm(t_list, 2.0)
        self.assertEqual([c is None for c in clipped], [True, False, True, False])
        self.assertAllClose(norm, expected_norm)
        for got, want in zip(clipped, expected):
            if want is not None:
                self.assertAllClose(got, want)
        for t_list in ([], [None, None]):
            clipped, norm = tfco.clip_by_global_norm(t_list, 1.0)
            expected, expected_norm = tf.clip_by_global_norm(t_list, 1.0)
            self.assertEqual(clipped, expected)
            self.assertEqual(norm.dtype, expected_norm.dtype)
            self.assertAllEqual(norm, expected_norm)

    def test_indexed_slices_as_tf(self):
        # Embedding gradients: clipped through their values, indices kept.
        slices = tf.IndexedSlices(
            tf.constant([[3.0, 4.0], [1.0, 2.0]]), tf.constant([2, 0]), [4, 2]
        )
        t_list = [slices, tf.constant([5.0])]
        clipped, norm = tfco.clip_by_global_norm(t_list, 1.0)
        expected, expected_norm = tf.clip_by_global_norm(t_list, 1.0)
        self.assertIsInstance(clipped[0], tf.IndexedSlices)
        self.assertAllEqual(clipped[0].indices, slices.indices)
        self.assertAllClose(clipped[0].values, expected[0].values)
        self.assertAllClose(clipped[1], expected[1])
        self.assertAllClose(norm, expected_norm)

    def test_single_tensor_is_a_type_error(self):
        for t_list in (tf.ones([3]), np.ones([3]), "t"):
            with self.assertRaisesRegex(
                TypeError, r"t_list must be a list of tensors, got .*wrap a single"
            ):
                tfco.clip_by_global_norm(t_list, 1.0)

    def test_second_order_gradient(self):
        # A gradient of the clipped values' gradient, through
        # ClipByGlobalNormGrad's own gradient, clipping and not.
        rng = np.random.default_rng(5)
        t_list = [
            tf.constant(rng.standard_normal(3)),
            tf.constant(rng.standard_normal((2, 2))),
        ]
        for clip in (0.5, 100.0):

            def first_order(a, b, clip_norm):
                with tf.GradientTape() as tape:
                    tape.watch([a, b, clip_norm])
                    (ca, cb), norm = tfco.clip_by_global_norm([a, b], clip_norm)
                    loss = tf.reduce_sum(tf.sin(ca)) + tf.reduce_sum(cb**2) + norm
                da, db, dclip = tape.gradient(loss, [a, b, clip_norm])
                return tf.reduce_sum(da**2) + tf.reduce_sum(tf.cos(db)) + dclip

            theoretical, numerical = tf.test.compute_gradient(
                first_order, [*t_list, tf.constant(clip, tf.float64)], delta=1e-6
            )
            self.assertAllClose(theoretical, numerical, rtol=1e-5, atol=1e-5)

    def test_clip_norm_of_another_dtype(self):
        with self.assertRaisesRegex(
            TypeError,
            r"^clip_by_global_norm: clip_norm must have t_list's dtype, float32, "
            r"got float64$",
        ):
            tfco.clip_by_global_norm(
                [tf.ones([2], tf.float32)], tf.constant(1.0, tf.float64)
            )
        # A Python number takes t_list's dtype.
        clipped, norm = tfco.clip_by_global_norm([tf.ones([4], tf.float16)], 1)
        self.assertEqual(norm.dtype, tf.float16)
        self.assertAllClose(clipped[0], [0.5] * 4)

    def test_mixed_dtypes(self):
        with self.assertRaisesRegex(TypeError, r"t_list must hold tensors of one"):
            tfco.clip_by_global_norm(
                [tf.ones([2], tf.float32), tf.ones([2], tf.float64)], 1.0
            )

    @parameterized.parameters(tf.int32, tf.complex64)
    def test_bad_dtype(self, dtype):
        with self.assertRaisesRegex(
            TypeError, rf"one type among float16.*got \['{dtype.name}'\]"
        ):
            tfco.clip_by_global_norm([tf.ones([2], dtype)], tf.ones([], dtype))


_CHILD = """
import hashlib, sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
import tensorflow_customops as tfco
rng = np.random.default_rng(3)
sizes = [300000, 17, 70001, 1] + list(range(1, 4000, 97))  # chunks span tensors
t = [tf.constant(rng.normal(size=n), tf.float32) for n in sizes]
clipped, norm = tfco.clip_by_global_norm(t, 1.0)
with tf.GradientTape() as tape:
    tape.watch(t)
    out, _ = tfco.clip_by_global_norm(t, 1.0)
grads = tape.gradient(out, t, output_gradients=[x * 3.0 for x in t])
data = b"".join(x.numpy().tobytes() for x in clipped + [norm] + grads)
print(hashlib.sha256(data).hexdigest())
"""


class ClipByGlobalNormDeterminismTest(tf.test.TestCase):
    def test_same_bits_for_every_thread_count(self):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        digests = {
            threads: subprocess.run(
                [sys.executable, "-c", _CHILD, str(threads)],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            ).stdout.split()[-1]
            for threads in (1, 2, 4)
        }
        self.assertLen(set(digests.values()), 1, digests)


if __name__ == "__main__":
    tf.test.main()
