"""ONNX export of CheckCondition: the check is left out (ONNX cannot raise)
and its values pass through as Identity."""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util


class CheckConditionExportTest(tf.test.TestCase):
    def test_values_pass_through(self):
        @tf.function
        def fn(x, n):
            a, b = tfco.check_condition(tf.reduce_all(x > 0), [x * 2, n], "positive")
            return a + 1, b

        x, n = np.float32([[1, 2, 3]]), np.int64([4, 5])
        expected, got, model = onnx_test_util.export_and_run(
            fn,
            [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None], tf.int64)],
            [x, n],
        )
        self.assertFalse(
            [node for node in model.graph.node if "CheckCondition" in node.op_type]
        )
        for want, have in zip(expected, got):
            self.assertAllEqual(want, have)
        # Where the condition is false TensorFlow raises; ONNX passes through.
        have = onnx_test_util.run(model, [-x, n])
        self.assertAllEqual(have[0], -2 * x + 1)
        self.assertAllEqual(have[1], n)


if __name__ == "__main__":
    tf.test.main()
