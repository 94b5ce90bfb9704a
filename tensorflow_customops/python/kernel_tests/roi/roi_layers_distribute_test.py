"""A training step through tfco.layers.RoIAlign under MirroredStrategy over two
logical CPUs gives the loss and gradients of the same step without it.

Each replica gets one image and that image's boxes, `[1, K, 4]`: per-image
boxes shard with their images.
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
# Three boxes per image.
_BOXES = np.array(
    [
        [[0.0, 0.0, 20.0, 20.0], [3.5, 2.0, 15.0, 9.0], [8.0, 8.0, 23.0, 23.0]],
        [[1.0, 4.0, 12.0, 22.0], [0.0, 0.0, 23.0, 23.0], [6.25, 6.75, 10.0, 14.0]],
    ],
    np.float32,
)
_TARGETS = np.random.default_rng(1).normal(size=(2, 3, 2)).astype(np.float32)


def _model():
    keras.utils.set_random_seed(2)
    images = keras.Input((12, 12, 3))
    boxes = keras.Input((None, 4))
    features = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(images)
    pooled = tfco.layers.RoIAlign(3, spatial_scale=0.5, sampling_ratio=2, aligned=True)(
        features, boxes
    )
    scores = keras.layers.Dense(2)(keras.layers.Reshape((-1, 3 * 3 * 4))(pooled))
    return keras.Model([images, boxes], scores)


def _loss_and_grads(model, images, boxes, targets, num_boxes):
    """Squared error summed over this call's boxes, over all boxes' count."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum((model([images, boxes]) - targets) ** 2) / num_boxes
    return loss, tape.gradient(loss, model.trainable_variables)


class RoiLayersDistributeTest(tf.test.TestCase):
    def test_mirrored_step_matches_single_device(self):
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        self.assertLen(devices, 2)
        num_boxes = float(_BOXES.shape[0] * _BOXES.shape[1])

        model = _model()
        weights = model.get_weights()
        loss, grads = _loss_and_grads(model, _IMAGES, _BOXES, _TARGETS, num_boxes)

        strategy = tf.distribute.MirroredStrategy(devices)
        with strategy.scope():
            mirrored = _model()
        mirrored.set_weights(weights)

        def shard(context):
            n = context.replica_id_in_sync_group
            return _IMAGES[n : n + 1], _BOXES[n : n + 1], _TARGETS[n : n + 1]

        images, boxes, targets = strategy.experimental_distribute_values_from_function(
            shard
        )

        @tf.function
        def step(images, boxes, targets):
            return strategy.run(
                _loss_and_grads,
                args=(mirrored, images, boxes, targets, num_boxes),
            )

        replica_loss, replica_grads = step(images, boxes, targets)
        mirrored_loss = strategy.reduce("SUM", replica_loss, axis=None)
        self.assertAllClose(mirrored_loss, loss, rtol=1e-6, atol=1e-7)
        self.assertLen(replica_grads, len(grads))
        for replica_grad, grad in zip(replica_grads, grads):
            total = strategy.reduce("SUM", replica_grad, axis=None)
            self.assertAllClose(total, grad, rtol=1e-5, atol=1e-6)
            self.assertGreater(float(tf.reduce_sum(tf.abs(grad))), 0.0)


if __name__ == "__main__":
    tf.test.main()
