"""RoI layers in Keras `fit`, `evaluate` and `predict`: per-image boxes
(`[N, K, 4]` with `box_counts`, and ragged) stay with their images when Keras
slices and shuffles the batch, for any batch size and for `tf.data` input, and
training gives the loss and weights of a plain loop over the same batches.

With `[K, 5]` rows this fails: `fit` slices the rows along with the images,
so their batch indices point at the wrong images (or past the batch)."""

import keras
import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco

_N, _K = 10, 4
_COUNTS = np.array([4, 1, 0, 3, 2, 4, 1, 2, 3, 4], np.int32)


def _data():
    """Image i is filled with i; its boxes lie inside it; padding boxes are
    NaN, which the ops would reject were they not skipped."""
    rng = np.random.default_rng(0)
    images = np.broadcast_to(
        np.arange(_N, dtype=np.float32)[:, None, None, None], (_N, 12, 12, 2)
    ).copy()
    corner = rng.uniform(0, 10, size=(_N, _K, 2))
    size = rng.uniform(2, 12, size=(_N, _K, 2))
    boxes = np.concatenate([corner, np.minimum(corner + size, 23.0)], -1)
    valid = np.arange(_K)[None, :] < _COUNTS[:, None]
    boxes = np.where(valid[..., None], boxes, np.nan).astype(np.float32)
    return images, boxes, valid


def _box_model(ragged=False, trainable=True):
    """Pooled features of each box through a small head: one score per box,
    [N, K, 1] (padded) or [N, None, 1] (ragged)."""
    keras.utils.set_random_seed(1)
    images = keras.Input((12, 12, 2), name="images")
    boxes = keras.Input((None, 4), ragged=ragged, name="boxes")
    inputs = [images, boxes]
    features = images
    if trainable:
        features = keras.layers.Conv2D(3, 3, padding="same", name="conv")(images)
    roi_align = tfco.layers.RoIAlign(2, spatial_scale=0.5, sampling_ratio=2)
    if ragged:
        pooled = roi_align([features, boxes])
    else:
        counts = keras.Input((), dtype="int32", name="box_counts")
        inputs.append(counts)
        pooled = roi_align([features, boxes, counts])
    # Mean over the bins and channels: the image's value, for the untrained
    # model.
    scores = keras.layers.Lambda(
        lambda p: tf.reduce_mean(p, axis=[-3, -2, -1])[..., None]
    )(pooled)
    if trainable:
        scores = keras.layers.Dense(1, name="head")(scores)
    return keras.Model(inputs, scores)


class RoiLayersFitTest(tf.test.TestCase):
    def test_boxes_follow_their_images(self):
        # Untrained model: each box's score is its image's index, so the mean
        # absolute error is 0 exactly when every box reads its own image.
        images, boxes, valid = _data()
        targets = np.where(valid, np.arange(_N)[:, None], 0.0)[..., None]
        model = _box_model(trainable=False)
        model.compile(optimizer="sgd", loss="mae")
        x = [images, boxes, _COUNTS]
        for batch_size in (1, 3, 4, _N):
            with self.subTest(batch_size=batch_size):
                history = model.fit(
                    x, targets, batch_size=batch_size, shuffle=True, epochs=2, verbose=0
                )
                self.assertEqual(history.history["loss"], [0.0, 0.0])
                self.assertEqual(
                    model.evaluate(x, targets, batch_size=batch_size, verbose=0), 0.0
                )
                predicted = model.predict(x, batch_size=batch_size, verbose=0)
                self.assertAllEqual(predicted, targets)
        dataset = (
            tf.data.Dataset.from_tensor_slices((tuple(x), targets))
            .shuffle(_N, seed=2)
            .batch(3)
        )
        self.assertEqual(model.fit(dataset, verbose=0).history["loss"], [0.0])

    def test_ragged_boxes_follow_their_images(self):
        images, boxes, _ = _data()
        model = _box_model(ragged=True, trainable=False)
        per_image = keras.layers.Lambda(lambda s: tf.reduce_mean(s, axis=[1, 2]))(
            model.output
        )
        model = keras.Model(model.inputs, per_image)
        model.compile(optimizer="sgd", loss="mae")
        has_boxes = _COUNTS > 0
        targets = np.arange(_N, dtype=np.float32)[has_boxes]
        dataset = (
            tf.data.Dataset.from_tensor_slices(
                (
                    (
                        images[has_boxes],
                        tf.RaggedTensor.from_tensor(
                            boxes[has_boxes], lengths=_COUNTS[has_boxes]
                        ),
                    ),
                    targets,
                )
            )
            .shuffle(_N, seed=3)
            .batch(4)
        )
        self.assertEqual(
            model.fit(dataset, epochs=2, verbose=0).history["loss"], [0.0, 0.0]
        )
        predicted = model.predict(dataset.map(lambda x, y: (x,)), verbose=0)
        self.assertAllEqual(np.sort(predicted), targets)

    def test_shuffled_fit_equals_a_plain_loop(self):
        images, boxes, valid = _data()
        targets = np.random.default_rng(4).standard_normal((_N, _K, 1))
        targets = targets.astype(np.float32)
        x = (images, boxes, _COUNTS)
        weights = valid.astype(np.float32)  # padding boxes count for nothing

        # The loss is a mean over examples: with a learning rate of 0, a
        # shuffled fit of any batch size gives the unshuffled loss.
        model = _box_model()
        initial = model.get_weights()
        loss_fn = keras.losses.MeanSquaredError()
        expected = float(loss_fn(targets, model(list(x)), sample_weight=weights))
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss_fn)
        for batch_size in (3, 7):
            history = model.fit(
                list(x),
                targets,
                sample_weight=weights,
                batch_size=batch_size,
                shuffle=True,
                verbose=0,
            )
            self.assertAllClose(history.history["loss"][0], expected, rtol=1e-5)

        # Training: fit on a shuffled dataset gives the weights and loss of a
        # GradientTape loop over the same batches.
        def dataset():
            # A new dataset replays the same order.
            return (
                tf.data.Dataset.from_tensor_slices((x, targets, weights))
                .shuffle(_N, seed=5)
                .batch(4)
            )

        model.set_weights(initial)
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss=loss_fn)
        history = model.fit(dataset(), verbose=0)

        reference = _box_model()
        reference.set_weights(initial)
        optimizer = keras.optimizers.SGD(0.05)
        total, count = 0.0, 0
        for batch_x, batch_y, batch_w in dataset():
            with tf.GradientTape() as tape:
                loss = loss_fn(batch_y, reference(list(batch_x)), sample_weight=batch_w)
            grads = tape.gradient(loss, reference.trainable_variables)
            optimizer.apply_gradients(zip(grads, reference.trainable_variables))
            total += float(loss) * len(batch_y)  # Keras' mean over examples
            count += len(batch_y)
        self.assertAllClose(history.history["loss"][0], total / count, rtol=1e-6)
        for got, want in zip(model.get_weights(), reference.get_weights()):
            self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
        self.assertNotAllClose(model.get_weights()[0], initial[0])

    def test_fit_with_jit_compile(self):
        # The whole training step, RoI ops and their gradients included,
        # compiled by XLA: the same weights as without XLA.
        images, boxes, valid = _data()
        targets = np.random.default_rng(6).standard_normal((_N, _K, 1))
        x = [images, boxes, _COUNTS]
        trained = []
        for jit_compile in (False, True):
            model = _box_model()
            model.compile(
                optimizer=keras.optimizers.SGD(0.05),
                loss="mse",
                jit_compile=jit_compile,
            )
            self.assertEqual(model.jit_compile, jit_compile)
            model.fit(
                x,
                targets.astype(np.float32),
                sample_weight=valid.astype(np.float32),
                batch_size=4,
                epochs=2,
                verbose=0,
            )
            trained.append(model.get_weights())
        for got, want in zip(*trained):
            self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
        self.assertNotAllClose(trained[1][0], _box_model().get_weights()[0])


if __name__ == "__main__":
    tf.test.main()
