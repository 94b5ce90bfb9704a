"""Gradient tests of the RoI ops: the Python gradients against float64 numeric
Jacobians over seeds, box layouts, scales and layouts; the C++ gradients
(through SymbolicGradient) against the Python ones."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from tensorflow_customops.python.kernel_tests.gradient_test_util import (
    symbolic_gradient_of,
)
from tensorflow_customops.python.kernel_tests.roi import roi_test_util as util
from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()


def _small_case(op, seed, spatial_scale):
    # Small enough for a full numeric Jacobian, with every box layout.
    return util.make_case(
        op,
        seed=seed,
        spatial_scale=spatial_scale,
        output_size=(2, 2),
        sampling_ratio=2 if seed % 2 else -1,
        aligned=bool(seed % 2),
        batch=2,
        height=5,
        width=6,
    )


class RoiGradTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(
        op=util.OP_NAMES,
        seed=[0, 1],
        spatial_scale=[1.0, 0.5],
        data_format=["NHWC", "NCHW"],
    )
    def test_python_gradient_matches_numeric_jacobian(
        self, op, seed, spatial_scale, data_format
    ):
        case = _small_case(op, seed, spatial_scale)
        features = util.layout(case.features_nhwc, data_format)

        def fn(x):
            return util.call(op, x, case.rois, case, data_format=data_format)

        theoretical, numerical = tf.test.compute_gradient(fn, [features], delta=1e-4)
        self.assertAllClose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-6)
        # Boxes cover the map, so the Jacobian cannot be trivially zero.
        self.assertGreater(np.count_nonzero(theoretical[0]), 10)

    @parameterized.product(
        op=sorted(util.SAMPLING), sampling_ratio=[-1, 2], aligned=[False, True]
    )
    def test_gradient_of_boxes_sliding_off_the_map(self, op, sampling_ratio, aligned):
        # The gradient kernels skip a box none of whose samples can land on
        # the map; a box with one sample on it must still add its gradient.
        # The op is linear in the features, so its gradient g -> J^T g must
        # satisfy <J^T g, f> = <g, J f> with J f from the NumPy reference.
        case = util.sliding_off_case(op, sampling_ratio, aligned)
        features = tf.constant(case.features_nhwc)
        expected = util.reference(op, case)
        rng = np.random.default_rng(12)
        for _ in range(3):
            upstream = rng.standard_normal(expected.shape)
            with tf.GradientTape() as tape:
                tape.watch(features)
                pooled = util.call(op, features, case.rois, case)
            grad = tape.gradient(pooled, features, output_gradients=upstream)
            self.assertAllClose(
                np.sum(grad * case.features_nhwc),
                np.sum(upstream * expected),
                rtol=1e-12,
            )

    @parameterized.product(
        op=util.OP_NAMES,
        dtype=[tf.float16, tf.bfloat16, tf.float32, tf.float64],
        data_format=["NHWC", "NCHW"],
    )
    def test_cpp_gradient_equals_python_gradient(self, op, dtype, data_format):
        case = _small_case(op, seed=3, spatial_scale=0.5)
        rng = np.random.default_rng(4)
        with tf.Graph().as_default():
            features = tf.cast(util.layout(case.features_nhwc, data_format), dtype)
            out = util.call(op, features, case.rois, case, data_format=data_format)
            upstream = tf.constant(rng.standard_normal(out.shape), dtype)
            rois = out.op.inputs[1]
            python_grad, python_rois_grad = tf.gradients(
                out, [features, rois], grad_ys=upstream
            )
            # RoiPool's second output (argmax) gets a zero upstream gradient.
            grad_ys = [upstream] + [tf.zeros_like(t) for t in out.op.outputs[1:]]
            cpp_grad, cpp_rois_grad = symbolic_gradient_of(out.op, grad_ys)
            with tf.compat.v1.Session() as sess:
                python_value, cpp_value, python_rois, cpp_rois = sess.run(
                    [python_grad, cpp_grad, python_rois_grad, cpp_rois_grad]
                )
        self.assertEqual(cpp_value.dtype, python_value.dtype)
        self.assertAllEqual(cpp_value, python_value)
        self.assertGreater(np.count_nonzero(python_value), 10)
        # The box gradients (roi_box_grad_test checks them numerically); the
        # pooling ops' is zero.
        self.assertAllEqual(cpp_rois, python_rois)
        self.assertEqual(np.count_nonzero(cpp_rois) > 0, op in util.SAMPLING)

    @parameterized.product(
        op=util.OP_NAMES, dtype=[tf.float16, tf.bfloat16, tf.float32, tf.float64]
    )
    def test_nchw_gradient_equals_nhwc_bitwise(self, op, dtype):
        case = _small_case(op, seed=9, spatial_scale=0.5)
        shape = util.call(op, case.features_nhwc, case.rois, case).shape
        upstream = np.random.default_rng(9).standard_normal(shape)
        grads = {}
        for data_format, perm in (("NHWC", [0, 1, 2, 3]), ("NCHW", [0, 3, 1, 2])):
            x = tf.cast(util.layout(case.features_nhwc, data_format), dtype)
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = util.call(op, x, case.rois, case, data_format=data_format)
            dy = tf.cast(np.transpose(upstream, perm), dtype)
            grads[data_format] = tape.gradient(y, x, output_gradients=dy)
        self.assertAllEqual(tf.transpose(grads["NCHW"], [0, 2, 3, 1]), grads["NHWC"])

    @parameterized.product(op=util.OP_NAMES, dtype=[tf.float16, tf.bfloat16])
    def test_low_precision_gradient_close_to_float32(self, op, dtype):
        case = _small_case(op, seed=5, spatial_scale=0.5)
        grads = []
        for t in (dtype, tf.float32):
            x = tf.constant(case.features_nhwc, t)
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = util.call(op, x, case.rois, case)
            grads.append(tf.cast(tape.gradient(y, x), tf.float32))
        self.assertEqual(grads[0].dtype, tf.float32)
        self.assertAllClose(grads[0], grads[1], rtol=2e-2, atol=2e-2)

    @parameterized.parameters(util.OP_NAMES)
    def test_gradient_in_tf_function_with_unknown_shapes(self, op):
        case = _small_case(op, seed=7, spatial_scale=0.5)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, None, None], tf.float64),
                tf.TensorSpec([None, 5], tf.float32),
            ]
        )
        def grad_fn(features, rois):
            with tf.GradientTape() as tape:
                tape.watch(features)
                y = util.call(op, features, rois, case)
            return tape.gradient(y, features)

        x = tf.constant(case.features_nhwc)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = util.call(op, x, case.rois, case)
        self.assertAllEqual(grad_fn(x, case.rois), tape.gradient(y, x))

    @parameterized.product(op=util.OP_NAMES, data_format=["NHWC", "NCHW"], seed=[0, 1])
    def test_second_order_matches_numeric_jacobian(self, op, data_format, seed):
        # The first-order gradient as a function of the incoming gradient: its
        # Jacobian is what the gradient ops' own gradients compute.
        case = _small_case(op, seed, spatial_scale=0.5)
        features = util.layout(case.features_nhwc, data_format)

        def first_order(upstream):
            with tf.GradientTape() as tape:
                tape.watch(features)
                y = util.call(op, features, case.rois, case, data_format=data_format)
            return tape.gradient(y, features, output_gradients=upstream)

        shape = util.call(op, features, case.rois, case, data_format=data_format).shape
        upstream = tf.constant(np.random.default_rng(seed).standard_normal(shape))
        theoretical, numerical = tf.test.compute_gradient(first_order, [upstream])
        self.assertAllClose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-6)
        self.assertGreater(np.count_nonzero(theoretical[0]), 10)

    @parameterized.parameters(util.OP_NAMES)
    def test_gradient_penalty(self, op):
        # A gradient penalty differentiates the features' gradient with
        # respect to weights applied after the op (it used to get None).
        case = _small_case(op, seed=8, spatial_scale=0.5)
        features = tf.constant(case.features_nhwc)
        rng = np.random.default_rng(8)
        weights = tf.constant(rng.standard_normal([util.pooled_channels(op, case)]))

        def penalty(w):
            with tf.GradientTape() as tape:
                tape.watch(features)
                score = tf.reduce_sum(util.call(op, features, case.rois, case) * w)
            return tf.reduce_sum(tape.gradient(score, features) ** 2)

        theoretical, numerical = tf.test.compute_gradient(penalty, [weights])
        self.assertAllClose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-6)
        self.assertGreater(np.count_nonzero(theoretical[0]), 0)

    def test_roi_pool_gradient_goes_to_argmax(self):
        features = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
        with tf.GradientTape() as tape:
            tape.watch(features)
            y = util.call(
                "roi_pool",
                features,
                [[0, 0, 0, 3, 3]],
                util.make_case("roi_pool", seed=0, output_size=(2, 2)),
            )
        grad = tape.gradient(y, features)[0, :, :, 0]
        expected = np.zeros([4, 4])
        expected[1, 1] = expected[1, 3] = expected[3, 1] = expected[3, 3] = 1
        self.assertAllEqual(grad, expected)

    @parameterized.parameters("NHWC", "NCHW")
    def test_roi_pool_grad_adds_at_any_argmax(self, data_format):
        # RoiPoolGrad takes argmax as an input: values anywhere in the map (not
        # only in their bins, as the forward's are) still get their gradient,
        # whichever band of rows the kernel's work items own.
        rng = np.random.default_rng(0)
        batch, height, width, channels, boxes = 2, 64, 48, 8, 6
        rois = np.array(
            [[k % batch, 0, 0, 30 + k, 40 - k] for k in range(boxes)], np.float32
        )
        shape = [boxes, 3, 3, channels]
        grads = rng.normal(size=shape)
        argmax = rng.integers(-1, height * width, size=shape).astype(np.int32)
        expected = np.zeros([batch, height * width, channels])
        for k, i, j, c in np.ndindex(*shape):
            if argmax[k, i, j, c] >= 0:
                expected[int(rois[k, 0]), argmax[k, i, j, c], c] += grads[k, i, j, c]
        expected = expected.reshape([batch, height, width, channels])
        features_shape = [batch, height, width, channels]
        if data_format == "NCHW":
            grads, argmax = grads.transpose(0, 3, 1, 2), argmax.transpose(0, 3, 1, 2)
            expected = expected.transpose(0, 3, 1, 2)
            features_shape = [batch, channels, height, width]
        grad = _ops.custom_ops_roi_pool_grad(
            grads=tf.constant(grads),
            rois=rois,
            argmax=argmax,
            features_shape=features_shape,
            pooled_height=3,
            pooled_width=3,
            spatial_scale=1.0,
            data_format=data_format,
        )
        self.assertAllClose(grad, expected, rtol=1e-12, atol=1e-12)


if __name__ == "__main__":
    tf.test.main()
