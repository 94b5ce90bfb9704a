"""The CPU kernel is parallel and still bitwise deterministic: the same output
for 1, 2 and 4 intra-op threads. Thread counts are fixed at TensorFlow start-up,
so each count runs in its own process."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

_CHILD = """
import hashlib, sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
import tensorflow_customops as tfco
x = tf.constant(np.random.default_rng(7).normal(size=(1024, 1031)))
forward = tfco.zero_out(x).numpy()
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tfco.zero_out(x)
grad = tape.gradient(y, x, output_gradients=x * 3.0).numpy()
print(hashlib.sha256(forward.tobytes() + grad.tobytes()).hexdigest())
"""


class ZeroOutDeterminismTest(tf.test.TestCase):
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

        x = np.random.default_rng(7).normal(size=(1024, 1031))
        expected_forward = np.zeros_like(x)
        expected_forward[0, 0] = x[0, 0]
        expected_grad = np.zeros_like(x)
        expected_grad[0, 0] = x[0, 0] * 3.0
        expected = hashlib.sha256(
            expected_forward.tobytes() + expected_grad.tobytes()
        ).hexdigest()
        self.assertEqual(digests[1], expected)


if __name__ == "__main__":
    tf.test.main()
