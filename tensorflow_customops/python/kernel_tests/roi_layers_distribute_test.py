"""A training step through tfco.layers.RoIAlign under MirroredStrategy over two
logical CPUs gives the loss and gradients of the same step without it.

Each replica gets one image and that image's boxes (batch indices rebased to
0), the way a detector's input pipeline would shard them.
"""

import keras
import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco


def setUpModule():
    # Must run before any TensorFlow op initialises the CPU device.
    (cpu,) = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )


_IMAGES = np.random.default_rng(0).normal(size=(2, 12, 12, 3)).astype(np.float32)
_ROIS = np.array(
    [
        [0, 0.0, 0.0, 20.0, 20.0],
        [0, 3.5, 2.0, 15.0, 9.0],
        [0, 8.0, 8.0, 23.0, 23.0],
        [1, 1.0, 4.0, 12.0, 22.0],
        [1, 0.0, 0.0, 23.0, 23.0],
        [1, 6.25, 6.75, 10.0, 14.0],
    ],
    np.float32,
)
_TARGETS = np.random.default_rng(1).normal(size=(6, 2)).astype(np.float32)


def _model():
    keras.utils.set_random_seed(2)
    images = keras.Input((12, 12, 3))
    rois = keras.Input((5,), batch_size=None)
    features = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(images)
    pooled = tfco.layers.RoIAlign(3, spatial_scale=0.5, sampling_ratio=2, aligned=True)(
        [features, rois]
    )
    scores = keras.layers.Dense(2)(keras.layers.Flatten()(pooled))
    return keras.Model([images, rois], scores)


def _loss_and_grads(model, images, rois, targets, num_rois):
    """Squared error summed over this call's boxes, over all boxes' count."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum((model([images, rois]) - targets) ** 2) / num_rois
    return loss, tape.gradient(loss, model.trainable_variables)


class RoiLayersDistributeTest(tf.test.TestCase):
    def test_mirrored_step_matches_single_device(self):
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        self.assertLen(devices, 2)
        num_rois = float(len(_ROIS))

        model = _model()
        weights = model.get_weights()
        loss, grads = _loss_and_grads(model, _IMAGES, _ROIS, _TARGETS, num_rois)

        strategy = tf.distribute.MirroredStrategy(devices)
        with strategy.scope():
            mirrored = _model()
        mirrored.set_weights(weights)

        def shard(context):
            n = context.replica_id_in_sync_group
            mine = _ROIS[:, 0] == n
            rois = _ROIS[mine].copy()
            rois[:, 0] = 0
            return _IMAGES[n : n + 1], rois, _TARGETS[mine]

        images, rois, targets = strategy.experimental_distribute_values_from_function(
            shard
        )

        @tf.function
        def step(images, rois, targets):
            return strategy.run(
                _loss_and_grads,
                args=(mirrored, images, rois, targets, num_rois),
            )

        replica_loss, replica_grads = step(images, rois, targets)
        mirrored_loss = strategy.reduce("SUM", replica_loss, axis=None)
        self.assertAllClose(mirrored_loss, loss, rtol=1e-6, atol=1e-7)
        self.assertLen(replica_grads, len(grads))
        for replica_grad, grad in zip(replica_grads, grads):
            total = strategy.reduce("SUM", replica_grad, axis=None)
            self.assertAllClose(total, grad, rtol=1e-5, atol=1e-6)
            self.assertGreater(float(tf.reduce_sum(tf.abs(grad))), 0.0)


if __name__ == "__main__":
    tf.test.main()
