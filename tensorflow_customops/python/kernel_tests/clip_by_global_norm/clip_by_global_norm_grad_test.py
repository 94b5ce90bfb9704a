"""Gradient tests of CustomOps>ClipByGlobalNorm: the Python gradient against
the numeric Jacobian and TensorFlow's autodiff of tf.clip_by_global_norm, the
C++ (FunctionDefHelper) gradient against both, and the gradient op's errors."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import gradient_test_util
from tensorflow_customops.python.ops import clip_by_global_norm_ops

_OP = "CustomOps>ClipByGlobalNorm"
# Norm of the operands below is about 3.6: clip_norm 1 clips, 10 does not.
_CLIP_NORMS = [1.0, 10.0]


def _operands(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(2, 3)), rng.normal(size=(4,))]


def _forward(*xs):
    clipped, norm = tfco.clip_by_global_norm(list(xs[:-1]), xs[-1])
    return clipped + [norm]


def _output(k):
    """_forward's output k, as a function of exactly three tensors (the
    gradient checker calls it positionally)."""

    def forward_k(x, y, clip_norm):
        return _forward(x, y, clip_norm)[k]

    return forward_k


class ClipByGlobalNormGradTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(clip_norm=_CLIP_NORMS, output=[0, 1, 2])
    def test_python_gradient_matches_numeric_jacobian(self, clip_norm, output):
        xs = [tf.constant(v) for v in _operands()] + [
            tf.constant(clip_norm, tf.float64)
        ]
        theoretical, numerical = tf.test.compute_gradient(_output(output), xs)
        for t, n in zip(theoretical, numerical):
            self.assertAllClose(t, n, rtol=1e-6, atol=1e-6)

    @parameterized.parameters(*_CLIP_NORMS)
    def test_python_gradient_matches_tf_autodiff(self, clip_norm):
        t = [tf.constant(v) for v in _operands(seed=1)]
        c = tf.constant(clip_norm, tf.float64)
        upstream = [x * 0.5 + 1.0 for x in t]
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(t + [c])
            ours, our_norm = tfco.clip_by_global_norm(t, c)
            theirs, their_norm = tf.clip_by_global_norm(t, c)
            our_loss = sum(tf.reduce_sum(u * y) for u, y in zip(upstream, ours))
            our_loss += 2.0 * our_norm
            their_loss = sum(tf.reduce_sum(u * y) for u, y in zip(upstream, theirs))
            their_loss += 2.0 * their_norm
        self.assertAllClose(
            tape.gradient(our_loss, t + [c]), tape.gradient(their_loss, t + [c])
        )

    @parameterized.product(
        clip_norm=_CLIP_NORMS, dtype=[tf.float16, tf.bfloat16, tf.float32, tf.float64]
    )
    def test_cpp_gradient_equals_python_gradient(self, clip_norm, dtype):
        x_values = _operands(seed=2)[:2] + [np.array(clip_norm)]
        rng = np.random.default_rng(3)
        dy_values = [rng.normal(size=(2, 3)), rng.normal(size=(4,)), np.array(0.3)]
        python_grads, cpp_grads = gradient_test_util.cpp_and_python_gradients(
            _forward, _OP, x_values, dy_values, {"N": 2, "T": dtype}, dtype
        )
        self.assertLen(cpp_grads, 3)
        for python_grad, cpp_grad in zip(python_grads, cpp_grads):
            self.assertEqual(cpp_grad.dtype, python_grad.dtype)
            self.assertAllEqual(cpp_grad, python_grad)

    @parameterized.parameters(*_CLIP_NORMS)
    def test_cpp_gradient_matches_numeric_jacobian(self, clip_norm):
        x_values = _operands(seed=4)[:2] + [np.array(clip_norm)]
        cpp = gradient_test_util.cpp_jacobians(
            _OP, x_values, [(2, 3), (4,), ()], {"N": 2, "T": tf.float64}
        )
        for output in range(3):
            _, numerical = tf.test.compute_gradient(
                _output(output),
                [tf.constant(v) for v in x_values],
            )
            for c, n in zip(cpp[output], numerical):
                self.assertAllClose(c, n, rtol=1e-6, atol=1e-6)

    def test_gradient_with_empty_tensor_and_unknown_shapes(self):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)] * 2)
        def grads(x, y):
            with tf.GradientTape() as tape:
                tape.watch([x, y])
                clipped, _ = tfco.clip_by_global_norm([x, y], 1.0)
            return tape.gradient(clipped, [x, y])

        dx, dy = grads(tf.zeros([0, 3]), tf.constant([3.0, 4.0]))
        self.assertEqual(dx.shape, (0, 3))
        # With a ones upstream: 0.2 * 1 - x * (0.2 * 7) / 25.
        self.assertAllClose(dy, [0.2 - 3.0 * 1.4 / 25, 0.2 - 4.0 * 1.4 / 25])

    def test_zero_tensors_have_finite_gradient(self):
        x = tf.zeros([3])
        with tf.GradientTape() as tape:
            tape.watch(x)
            clipped, norm = tfco.clip_by_global_norm([x], 1.0)
            loss = tf.reduce_sum(clipped[0]) + norm
        self.assertAllEqual(tape.gradient(loss, x), [1.0, 1.0, 1.0])

    def test_gradient_op_errors(self):
        grad_op = clip_by_global_norm_ops._ops.custom_ops_clip_by_global_norm_grad
        fn = tf.function(
            lambda t, c, dy, dn: grad_op(
                t=[t], clip_norm=c, dclipped=[dy], dglobal_norm=dn
            ),
            input_signature=[tf.TensorSpec(None, tf.float32)] * 4,
        )
        ones = tf.ones([3])
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"dclipped\[0\] has shape \[2\] but t\[0\] has shape \[3\]",
        ):
            fn(ones, 1.0, tf.ones([2]), 1.0)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"dglobal_norm must be a scalar"
        ):
            fn(ones, 1.0, ones, ones)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, r"clip_norm must be a scalar"
        ):
            fn(ones, ones, ones, 1.0)


if __name__ == "__main__":
    tf.test.main()
