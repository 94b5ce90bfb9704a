"""Per-box heads on ragged per-image boxes, trained with Keras 3 `fit`.

Each image has its own number of proposals, given as a `tf.RaggedTensor`
`[N, None, 4]`, without padding. `tfco.layers.RoIAlign` pools them into a
ragged `[N, None, 7, 7, C]`; `BoxRows` turns that into the dense rows
`[sum K, 7, 7, C]` of every box in the batch, image after image, on which
Keras' own layers (`Flatten`, `Dense`) work. The targets and sample weights,
ragged per image in the dataset, become rows the same way in its last `map`,
after batching, so that Keras compares each box's prediction with its own
target. (Keras 3 cannot take the ragged result into `Dense`, ragged targets,
or a `to_tensor()` in a layer's `call`; padded boxes with `box_counts` are the
other way, see `two_stage_detector.py`.)

The data are the two-stage detector's squares and crosses on noise, with the
padding of its proposals dropped.

    bazel run //examples:ragged_boxes -- --epochs=4
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from examples import two_stage_detector as detector


@keras.saving.register_keras_serializable(package="examples")
class BoxRows(keras.layers.Layer):
    """A ragged `[N, None, ...]` batch of per-image boxes' values as the dense
    rows `[sum K, ...]`, image 0's boxes first (the ragged tensor's
    `flat_values`)."""

    def call(self, ragged):
        return ragged.flat_values

    def compute_output_spec(self, ragged):
        # Keras 3's symbolic call: a ragged input's spec has its dense shape.
        return keras.KerasTensor((None, *ragged.shape[2:]), dtype=ragged.dtype)


def build_model(seed=0):
    """A backbone of stride 4, RoIAlign of the ragged proposals, and class and
    box heads per proposal, whose outputs are rows `[sum K, ...]`."""
    keras.utils.set_random_seed(seed)
    images = keras.Input((detector.IMAGE_SIZE, detector.IMAGE_SIZE, 3), name="images")
    proposals = keras.Input((None, 4), ragged=True, name="proposals")
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(images)
    x = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)
    pooled = tfco.layers.RoIAlign(
        7, spatial_scale=1 / 4, sampling_ratio=2, aligned=True
    )([x, proposals])  # ragged [N, None, 7, 7, 32]
    rows = keras.layers.Flatten()(BoxRows()(pooled))  # [sum K, 7 * 7 * 32]
    hidden = keras.layers.Dense(64, activation="relu")(rows)
    outputs = {
        "class_logits": keras.layers.Dense(len(detector.CLASSES), name="class_logits")(
            hidden
        ),
        "box_deltas": keras.layers.Dense(4, name="box_deltas")(hidden),
    }
    return keras.Model([images, proposals], outputs)


def compile_model(model, learning_rate=2e-3):
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss={
            "class_logits": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True
            ),
            "box_deltas": keras.losses.Huber(),
        },
    )
    return model


def ragged_data(num_images, seed):
    """The detector's `synthetic_data` without padding: proposals, labels,
    box targets and the box loss's weights (zero for background proposals)
    as ragged `[N, None, ...]` tensors."""
    x, y, weights = detector.synthetic_data(num_images, seed)
    counts = x["proposal_counts"]

    def ragged(values):
        return tf.RaggedTensor.from_tensor(values, lengths=counts)

    return (
        {"images": tf.constant(x["images"]), "proposals": ragged(x["proposals"])},
        {name: ragged(values) for name, values in y.items()},
        {"box_deltas": ragged(weights["box_deltas"])},
    )


def _to_rows(x, y, weights):
    # Every real box counts once in the class loss: there is no padding.
    weights = dict(weights, class_logits=tf.ones_like(y["class_logits"]))
    return (
        x,
        {name: t.flat_values for name, t in y.items()},
        {name: tf.cast(t.flat_values, tf.float32) for name, t in weights.items()},
    )


def dataset(data, batch_size, shuffle_seed=None):
    """Batches of `ragged_data`: images and ragged proposals in, the targets
    and weights of the batch's boxes as rows `[sum K, ...]`."""
    ds = tf.data.Dataset.from_tensor_slices(data)
    if shuffle_seed is not None:
        ds = ds.shuffle(len(data[0]["images"]), seed=shuffle_seed)
    return ds.batch(batch_size).map(_to_rows)


def accuracy(model, data, batch_size=32):
    """Fraction of the proposals classified correctly."""
    logits = model.predict(
        dataset(data, batch_size).map(lambda x, y, w: (x,)), verbose=0
    )
    labels = data[1]["class_logits"].flat_values.numpy()
    return float(np.mean(np.argmax(logits["class_logits"], -1) == labels))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=16)
    args = parser.parse_args()
    train = ragged_data(args.images, seed=1)
    test = ragged_data(args.images // 4, seed=2)
    model = compile_model(build_model())
    model.fit(
        dataset(train, args.batch_size, shuffle_seed=0),
        epochs=args.epochs,
        validation_data=dataset(test, args.batch_size),
    )
    print(f"held-out proposal accuracy: {accuracy(model, test):.3f}")


if __name__ == "__main__":
    main()
