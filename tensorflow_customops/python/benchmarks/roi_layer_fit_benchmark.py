"""CPU benchmark of a Keras training step with tfco.layers.RoIAlign, compiled
with jit_compile=True against jit_compile=False: the step times, their ratio
and the losses of both, from the same weights and batches.

    bazel run //tensorflow_customops/python/benchmarks:roi_layer_fit_benchmark

The model is a detection head: a 3x3 convolution of the images, RoI Align of
each image's boxes (padded [N, K, 4] with counts), and two dense layers
scoring each box. Steps are train_on_batch calls on one fixed batch,
alternating between the two models (benchmark_util.median_seconds). The same
is timed with RoI Align replaced by average pooling, which shows what XLA
makes of the other layers.
"""

import argparse

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util

keras = tf.keras


def _model(size, channels, output_size, roi=True):
    keras.utils.set_random_seed(1)
    images = keras.Input((size, size, 3), name="images")
    boxes = keras.Input((None, 4), name="boxes")
    counts = keras.Input((), dtype="int32", name="box_counts")
    features = keras.layers.Conv2D(channels, 3, padding="same", activation="relu")(
        images
    )
    if roi:
        pooled = tfco.layers.RoIAlign(output_size, spatial_scale=1.0, sampling_ratio=2)(
            [features, boxes, counts]
        )
    else:
        pooled = keras.layers.AveragePooling2D(size // output_size)(features)
    flat = keras.layers.Reshape((-1, output_size * output_size * channels))(pooled)
    hidden = keras.layers.Dense(64, activation="relu")(flat)
    return keras.Model([images, boxes, counts], keras.layers.Dense(1)(hidden))


def _batch(n, size, boxes_per_image):
    rng = np.random.default_rng(0)
    images = rng.standard_normal((n, size, size, 3)).astype(np.float32)
    corner = rng.uniform(0, size * 0.7, size=(n, boxes_per_image, 2))
    extent = rng.uniform(4, size * 0.3, size=(n, boxes_per_image, 2))
    boxes = np.concatenate([corner, corner + extent], -1).astype(np.float32)
    counts = np.full([n], boxes_per_image, np.int32)
    targets = rng.standard_normal((n, boxes_per_image, 1)).astype(np.float32)
    return [images, boxes, counts], targets


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--boxes", type=int, default=64, help="per image")
    parser.add_argument("--output-size", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5, help="losses compared")
    args = parser.parse_args()
    print(benchmark_util.describe_machine())
    print(f"tfco jit lowering: custom calls = {tfco.build_info()['xla_custom_calls']}")
    x, y = _batch(args.images, args.size, args.boxes)
    for roi in (True, False):
        models = {}
        for jit_compile in (False, True):
            model = _model(args.size, args.channels, args.output_size, roi)
            model.compile(
                optimizer=keras.optimizers.SGD(0.01),
                loss="mse",
                jit_compile=jit_compile,
            )
            models[jit_compile] = model
        targets = y if roi else np.zeros([args.images, 1, 1], np.float32)
        losses = {
            jit: [float(m.train_on_batch(x, targets)) for _ in range(args.steps)]
            for jit, m in models.items()
        }
        for jit, values in losses.items():
            print(f"losses, jit_compile={jit}: " + " ".join(f"{v:.6f}" for v in values))
        plain, jit = benchmark_util.median_seconds(
            [lambda m=m, t=targets: m.train_on_batch(x, t) for m in models.values()]
        )
        head = "RoIAlign" if roi else "average pooling instead of RoIAlign"
        print(
            f"{head}: N={args.images} {args.size}x{args.size}x{args.channels} "
            f"K={args.boxes}/image {args.output_size}x{args.output_size}: step "
            f"jit_compile=False {plain * 1e3:.2f} ms, jit_compile=True "
            f"{jit * 1e3:.2f} ms, jit / plain {jit / plain:.2f}"
        )


if __name__ == "__main__":
    main()
