"""The two-stage detector's training step under MultiWorkerMirroredStrategy,
two worker processes on localhost, gives the losses and weights of one process
training on the same global batches.

Each worker reads the whole shuffled dataset (same seed) and tf.data's DATA
auto-sharding gives it half of every global batch; the gradients are summed
over the workers.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import keras
import numpy as np
import tensorflow as tf

from examples import two_stage_detector as detector

_IMAGES = 64
_GLOBAL_BATCH = 16
_EPOCHS = 2


def _train(strategy=None):
    """Losses of every step and the final weights."""
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = detector.build_model()
        # Linear in the gradient, unlike Adam, whose first steps are the
        # gradient's sign: summation-order noise in a near-zero gradient
        # would flip them.
        optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    step = detector.make_train_step(model, optimizer, strategy)
    data = strategy.experimental_distribute_dataset(_training_data())
    losses = [float(step(*batch)) for _ in range(_EPOCHS) for batch in data]
    return losses, model.get_weights()


def _training_data():
    data = detector.synthetic_data(_IMAGES, seed=8)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return detector.dataset(data, _GLOBAL_BATCH, shuffle_seed=9).with_options(options)


_WORKER = textwrap.dedent(
    """
    import sys

    import numpy as np
    import tensorflow as tf

    from examples.two_stage_detector_multiworker_test import _train

    losses, weights = _train(tf.distribute.MultiWorkerMirroredStrategy())
    np.savez(sys.argv[1], *weights, losses=losses)
    """
)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class TwoStageDetectorMultiWorkerTest(tf.test.TestCase):
    def test_two_workers_equal_one(self):
        workers = [f"localhost:{port}" for port in _free_ports(2)]
        directory = self.get_temp_dir()
        processes, outputs = [], []
        for index in range(2):
            outputs.append(os.path.join(directory, f"worker{index}.npz"))
            env = dict(os.environ)
            env["TF_CONFIG"] = json.dumps(
                {
                    "cluster": {"worker": workers},
                    "task": {"type": "worker", "index": index},
                }
            )
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", _WORKER, outputs[-1]],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        try:
            logs = [p.communicate(timeout=300)[0].decode() for p in processes]
        finally:
            for p in processes:
                p.kill()
        for p, log in zip(processes, logs):
            self.assertEqual(p.returncode, 0, log[-3000:])

        losses, expected = _train()
        self.assertLen(losses, _EPOCHS * _IMAGES // _GLOBAL_BATCH)
        for output in outputs:
            with np.load(output) as worker:
                self.assertAllClose(worker["losses"], losses, rtol=1e-5)
                weights = [worker[f"arr_{i}"] for i in range(len(expected))]
            for got, want in zip(weights, expected):
                self.assertAllClose(got, want, rtol=1e-4, atol=1e-5)
        self.assertLess(np.mean(losses[-4:]), np.mean(losses[:4]))


if __name__ == "__main__":
    tf.test.main()
