"""CPU kernels are parallel and still bitwise deterministic: forward and
backward give the same bits for 1, 2 and 4 intra-op threads and across runs.
Thread counts are fixed at TensorFlow start-up, so each count runs in its own
process."""

import json
import os
import subprocess
import sys

import tensorflow as tf

# Computes every op's forward and feature gradient on fixed inputs large
# enough to be split across threads, and prints one digest per op.
_CHILD = """
import hashlib, json, sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
import tensorflow_customops as tfco

def digest(fn, x):
    digests = []
    for _ in range(2):  # twice in one process, too
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        upstream = tf.reshape(tf.range(tf.size(y)) % 7, tf.shape(y))
        g = tape.gradient(y, x, output_gradients=tf.cast(upstream, y.dtype))
        data = y.numpy().tobytes() + g.numpy().tobytes()
        digests.append(hashlib.sha256(data).hexdigest())
    assert digests[0] == digests[1], digests
    return digests[0]

rng = np.random.default_rng(7)
features = tf.constant(rng.normal(size=(2, 40, 40, 64)), tf.float32)
boxes = rng.uniform(0, 40, size=(300, 4)).astype(np.float32)
rois = np.concatenate(
    [rng.integers(0, 2, (300, 1)).astype(np.float32),
     np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])], 1)
weights = tf.constant(rng.normal(size=(200, 700)), tf.float32)
out = {
    "zero_out": digest(tfco.zero_out, tf.constant(rng.normal(size=(1024, 1031)))),
    "matrix_mul": digest(
        lambda x: tfco.matrix_mul(x, weights, transpose_b=True),
        tf.constant(rng.normal(size=(300, 700)), tf.float32)),
    "roi_pool": digest(lambda x: tfco.roi_pool(x, rois, 4), features),
    "roi_align": digest(
        lambda x: tfco.roi_align(x, rois, 4, sampling_ratio=2, aligned=True),
        features),
    "roi_align_half": digest(
        lambda x: tfco.roi_align(x, rois, 4), tf.cast(features, tf.float16)),
    "ps_roi_pool": digest(lambda x: tfco.ps_roi_pool(x, rois, 4), features),
    "ps_roi_align": digest(lambda x: tfco.ps_roi_align(x, rois, 4), features),
}
print(json.dumps(out))
"""


class DeterminismTest(tf.test.TestCase):
    def test_same_bits_for_every_thread_count(self):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        runs = {}
        for threads in (1, 2, 4):
            result = subprocess.run(
                [sys.executable, "-c", _CHILD, str(threads)],
                capture_output=True,
                text=True,
                env=env,
            )
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            runs[threads] = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertLen(runs[1], 7)
        for op in runs[1]:
            self.assertEqual(runs[2][op], runs[1][op], f"{op}: 1 vs 2 threads")
            self.assertEqual(runs[4][op], runs[1][op], f"{op}: 1 vs 4 threads")


if __name__ == "__main__":
    tf.test.main()
