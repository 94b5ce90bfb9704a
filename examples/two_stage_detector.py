"""A small two-stage detector trained with Keras `fit` on synthetic images.

The first stage is stood in for by proposals jittered from the ground truth
(where an RPN would propose them), plus random background boxes. The second
stage pools every proposal from a two-level feature pyramid with
`tfco.layers.MultiScaleRoIAlign`, classifies it (background, square, cross)
and regresses its box. Images are squares and crosses drawn on noise,
generated from a seed: nothing is downloaded.

Proposals are per image, `[N, MAX_PROPOSALS, 4]` padded, with a count per
image, so Keras can slice and shuffle them together with their images.

With `--deformable` (the DCNv2 variant), the backbone's stride-8 convolution
is a `tfco.layers.DeformConv2D`, which learns where to sample.

With `--export-onnx PATH`, the trained inference model is exported to ONNX
(needs tf2onnx and onnxruntime) and run in ONNX Runtime on the held-out
images, against TensorFlow.

    bazel run //examples:two_stage_detector -- --epochs=8 [--deformable] \
        [--export-onnx /tmp/detector.onnx]
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco

IMAGE_SIZE = 64
CLASSES = ("background", "square", "cross")
MAX_OBJECTS = 3
PROPOSALS_PER_OBJECT = 4
BACKGROUND_PROPOSALS = 4
MAX_PROPOSALS = MAX_OBJECTS * PROPOSALS_PER_OBJECT + BACKGROUND_PROPOSALS
# Proposals overlapping an object by this much (IoU) are that object.
FOREGROUND_IOU = 0.5
# Largest difference allowed between the ONNX Runtime and TensorFlow outputs
# (which are of order 1). The RoI pooling is exact; the convolutions and dense
# layers sum in another order (a sum of n float32 terms moves by about
# sqrt(n) * 2^-24 of its terms' magnitude, n up to 1568 here): differences of
# 2e-7 to 7e-7 were measured, where proposals moved by half a pixel move the
# outputs by 0.05.
ONNX_TOLERANCE = 1e-5


def _draw(image, label, x, y, size):
    """A filled square (channel 0) or a cross (channel 1), brighter than the
    noise."""
    if label == 1:
        image[y : y + size, x : x + size, 0] += 1.0
    else:
        bar = max(size // 4, 2)
        middle = size // 2 - bar // 2
        image[y : y + size, x + middle : x + middle + bar, 1] += 1.0
        image[y + middle : y + middle + bar, x : x + size, 1] += 1.0


def _iou(box, others):
    x1 = np.maximum(box[0], others[:, 0])
    y1 = np.maximum(box[1], others[:, 1])
    x2 = np.minimum(box[2], others[:, 2])
    y2 = np.minimum(box[3], others[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)

    def area(b):
        return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])

    return inter / (area(box) + area(others) - inter)


def _deltas(proposal, target):
    """The box regression target: centre shift over the proposal's size, and
    the log of the size ratio."""
    pw, ph = proposal[2] - proposal[0], proposal[3] - proposal[1]
    tw, th = target[2] - target[0], target[3] - target[1]
    return [
        (target[0] + tw / 2 - proposal[0] - pw / 2) / pw,
        (target[1] + th / 2 - proposal[1] - ph / 2) / ph,
        np.log(tw / pw),
        np.log(th / ph),
    ]


def synthetic_data(num_images, seed):
    """Images, proposals and their targets, as `(x, y, sample_weight)` dicts
    for `fit`.

    Padding proposals get zero sample weight; background proposals get zero
    weight in the box loss.
    """
    rng = np.random.default_rng(seed)
    images = rng.normal(0.0, 0.3, (num_images, IMAGE_SIZE, IMAGE_SIZE, 3))
    proposals = np.zeros((num_images, MAX_PROPOSALS, 4))
    counts = np.zeros(num_images, np.int32)
    labels = np.zeros((num_images, MAX_PROPOSALS), np.int32)
    deltas = np.zeros((num_images, MAX_PROPOSALS, 4))
    for i in range(num_images):
        objects = []
        for _ in range(rng.integers(1, MAX_OBJECTS + 1)):
            size = int(rng.integers(10, 28))
            x, y = rng.integers(0, IMAGE_SIZE - size, size=2)
            label = int(rng.integers(1, len(CLASSES)))
            _draw(images[i], label, x, y, size)
            objects.append((label, np.array([x, y, x + size, y + size], float)))
        boxes = []
        for _, box in objects:
            size = box[2:] - box[:2]
            for _ in range(PROPOSALS_PER_OBJECT):
                boxes.append(box + rng.normal(0, 0.15, 4) * np.tile(size, 2))
        for _ in range(BACKGROUND_PROPOSALS):
            corner = rng.uniform(0, IMAGE_SIZE - 8, 2)
            boxes.append(np.concatenate([corner, corner + rng.uniform(6, 24, 2)]))
        boxes = np.clip(boxes, 0, IMAGE_SIZE)
        boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 2)
        counts[i] = len(boxes)
        proposals[i, : len(boxes)] = boxes
        truth = np.stack([box for _, box in objects])
        for k, box in enumerate(boxes):
            overlap = _iou(box, truth)
            best = int(np.argmax(overlap))
            if overlap[best] >= FOREGROUND_IOU:
                labels[i, k] = objects[best][0]
                deltas[i, k] = _deltas(box, truth[best])
    valid = np.arange(MAX_PROPOSALS)[None, :] < counts[:, None]
    x = {
        "images": images.astype(np.float32),
        "proposals": proposals.astype(np.float32),
        "proposal_counts": counts,
    }
    y = {"class_logits": labels, "box_deltas": deltas.astype(np.float32)}
    weights = {
        "class_logits": valid.astype(np.float32),
        "box_deltas": (labels > 0).astype(np.float32),
    }
    return x, y, weights


def build_model(seed=0, deformable=False):
    """Backbone with strides 4 and 8, MultiScaleRoIAlign, and class and box
    heads per proposal. The heads compute in float32 under mixed precision.
    With `deformable`, the stride-8 convolution is deformable (DCNv2)."""
    keras.utils.set_random_seed(seed)
    images = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3), name="images")
    proposals = keras.Input((MAX_PROPOSALS, 4), name="proposals")
    counts = keras.Input((), dtype="int32", name="proposal_counts")
    conv = keras.layers.Conv2D
    x = conv(16, 3, strides=2, padding="same", activation="relu")(images)
    stride4 = conv(32, 3, strides=2, padding="same", activation="relu")(x)
    if deformable:
        stride8 = tfco.layers.DeformConv2D(32, 3, strides=2, padding="same")(stride4)
        stride8 = keras.layers.Activation("relu")(stride8)
    else:
        stride8 = conv(32, 3, strides=2, padding="same", activation="relu")(stride4)
    # Objects of 10 to 28 pixels: below 16 from stride 4, above from stride 8.
    pooled = tfco.layers.MultiScaleRoIAlign(
        7,
        spatial_scales=[1 / 4, 1 / 8],
        sampling_ratio=2,
        aligned=True,
        canonical_scale=16,
        canonical_level=3,
    )([[stride4, stride8], proposals, counts])
    flat = keras.layers.Reshape((MAX_PROPOSALS, -1))(pooled)
    hidden = keras.layers.Dense(64, activation="relu")(flat)
    outputs = {
        "class_logits": keras.layers.Dense(
            len(CLASSES), dtype="float32", name="class_logits"
        )(hidden),
        "box_deltas": keras.layers.Dense(4, dtype="float32", name="box_deltas")(hidden),
    }
    return keras.Model([images, proposals, counts], outputs)


def compile_model(model, learning_rate=2e-3):
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=_losses())
    return model


def _losses():
    return {
        "class_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "box_deltas": keras.losses.Huber(),
    }


def make_train_step(model, optimizer, strategy=None):
    """A `tf.function` training step for custom loops, with the losses of
    `compile_model`: `step(x, y, sample_weight)` returns the loss.

    Under a `tf.distribute` strategy it takes distributed batches (from
    `strategy.experimental_distribute_dataset`). Keras losses divide each
    replica's loss by the replica count, so the summed gradients are those of
    the global batch's mean loss. (Keras 3.15's `fit` cannot train this model
    under MultiWorkerMirroredStrategy: it averages the first batch, a dict,
    with `strategy.reduce`, which takes tensors only.)
    """
    strategy = strategy or tf.distribute.get_strategy()
    losses = _losses()
    with strategy.scope():
        optimizer.build(model.trainable_variables)

    def replica_step(x, y, weights):
        with tf.GradientTape() as tape:
            outputs = model(x, training=True)
            loss = tf.add_n(
                [
                    fn(y[k], outputs[k], sample_weight=weights[k])
                    for k, fn in losses.items()
                ]
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def step(x, y, weights):
        per_replica = strategy.run(replica_step, args=(x, y, weights))
        return strategy.reduce("SUM", per_replica, axis=None)

    return step


def dataset(data, batch_size, shuffle_seed=None):
    """`tf.data` over `synthetic_data`'s dicts, shuffled when a seed is given."""
    ds = tf.data.Dataset.from_tensor_slices(data)
    if shuffle_seed is not None:
        ds = ds.shuffle(len(data[0]["images"]), seed=shuffle_seed)
    return ds.batch(batch_size)


def accuracy(model, data):
    """Fraction of the real (non-padding) proposals classified correctly."""
    x, y, weights = data
    predicted = np.argmax(model.predict(x, verbose=0)["class_logits"], -1)
    valid = weights["class_logits"] > 0
    return float(np.mean(predicted[valid] == y["class_logits"][valid]))


def inference_function(model):
    """The model's inference as a `tf.function` of (images, proposals,
    proposal_counts), any number of images, returning [class_logits,
    box_deltas]."""

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32),
            tf.TensorSpec([None, MAX_PROPOSALS, 4], tf.float32),
            tf.TensorSpec([None], tf.int32),
        ]
    )
    def infer(images, proposals, proposal_counts):
        outputs = model([images, proposals, proposal_counts], training=False)
        return [outputs["class_logits"], outputs["box_deltas"]]

    return infer


def export_onnx(model, path=None):
    """The inference model exported to ONNX (an `onnx.ModelProto`, also
    written to `path` if given)."""
    from tensorflow_customops.python.onnx import export

    infer = inference_function(model)
    return export.export(infer, infer.input_signature, path=path)


def onnx_differences(model, onnx_model, x):
    """Runs `onnx_model` in ONNX Runtime on the inputs `x` (as
    `synthetic_data` gives them) and returns, per output name, its largest
    absolute difference from `model` in TensorFlow."""
    import onnxruntime

    session = onnxruntime.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    inputs = [x["images"], x["proposals"], x["proposal_counts"]]
    feeds = {i.name: v for i, v in zip(session.get_inputs(), inputs)}
    got = session.run(None, feeds)
    expected = inference_function(model)(*inputs)
    return {
        name: float(np.max(np.abs(g - e.numpy())))
        for name, g, e in zip(("class_logits", "box_deltas"), got, expected)
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--mixed_precision", action="store_true")
    parser.add_argument(
        "--deformable",
        action="store_true",
        help="a deformable stride-8 convolution (DCNv2)",
    )
    parser.add_argument(
        "--export-onnx",
        metavar="PATH",
        help="export the trained inference model to ONNX at PATH and check it "
        "in ONNX Runtime",
    )
    args = parser.parse_args(argv)
    if args.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    train = synthetic_data(args.images, seed=1)
    test = synthetic_data(args.images // 4, seed=2)
    model = compile_model(build_model(deformable=args.deformable))
    x, y, weights = train
    model.fit(
        x,
        y,
        sample_weight=weights,
        batch_size=args.batch_size,
        epochs=args.epochs,
        shuffle=True,
        validation_data=test,
    )
    print(f"held-out proposal accuracy: {accuracy(model, test):.3f}")
    if args.export_onnx:
        differences = onnx_differences(
            model, export_onnx(model, args.export_onnx), test[0]
        )
        report = ", ".join(f"{name} {d:.2g}" for name, d in differences.items())
        if max(differences.values()) > ONNX_TOLERANCE:
            raise SystemExit(
                f"ONNX Runtime's outputs differ from TensorFlow's by more than "
                f"{ONNX_TOLERANCE}: {report}"
            )
        print(
            f"exported to {args.export_onnx}; ONNX Runtime against TensorFlow, "
            f"largest absolute difference: {report}"
        )


if __name__ == "__main__":
    main()
