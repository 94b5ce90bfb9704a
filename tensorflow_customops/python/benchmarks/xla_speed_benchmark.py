"""CPU benchmark of what jit_compile=True costs or saves on the installed
TensorFlow release: forward+backward steps of the RoI ops (RoiAlign, RoiPool,
PsRoiAlign, PsRoiPool), of multi_scale_roi_align and of DeformableConv2d,
each in a tf.function with and without jit_compile, side by side
(benchmark_util.median_seconds), with the XLA interface the lowerings use
(build_info()["xla_custom_call_api"]).

    bazel run //tensorflow_customops/python/benchmarks:xla_speed_benchmark

tools/wheel_matrix.sh runs it, and roi_layer_fit_benchmark, in each
release's virtualenv when BENCHMARKS names them (docs/benchmarks.md). The
cases are roi_benchmark's "default" (N=2, C=256, 64x64, K=512, 7x7; the
position-sensitive ops with C=392), multi_scale_roi_align over four levels
(N=2, C=256, a 512x512 image at strides 4 to 32, K=512 boxes an image, from
8 to 512 pixels, new boxes at every call as in training), and
deform_conv2d_benchmark's (N=2, C=O=256, 64x64, 3x3, with a mask).
A step returns the output and the gradients of the features (and of the
offsets, mask and filter), as a training step needs them.
"""

import argparse
import itertools

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util

_ROI_OPS = {
    "roi_align": (tfco.roi_align, {"sampling_ratio": 2}, 256),
    "roi_pool": (tfco.roi_pool, {}, 256),
    "ps_roi_align": (tfco.ps_roi_align, {"sampling_ratio": 2}, 8 * 49),
    "ps_roi_pool": (tfco.ps_roi_pool, {}, 8 * 49),
}


def _roi_step(fn, attrs, channels, quick):
    n, size, k = (1, 16, 32) if quick else (2, 64, 512)
    rng = np.random.default_rng(0)
    features = tf.constant(rng.standard_normal((n, size, size, channels)), tf.float32)
    corners = np.sort(rng.uniform(0, size * 16, size=(k, 2, 2)), axis=1)
    rois = tf.constant(
        np.concatenate(
            [rng.integers(0, n, (k, 1)), corners[:, 0], corners[:, 1]], axis=1
        ),
        tf.float32,
    )

    def step(features, rois):
        with tf.GradientTape() as tape:
            tape.watch(features)
            pooled = fn(features, rois, 7, spatial_scale=1 / 16, **attrs)
        return pooled, tape.gradient(pooled, features)

    return step, lambda: (features, rois)


def _multi_scale_step(quick):
    n, c, size, k = (1, 8, 64, 32) if quick else (2, 256, 512, 512)
    rng = np.random.default_rng(0)
    strides = (4, 8, 16, 32)
    features = [
        tf.constant(rng.standard_normal((n, size // s, size // s, c)), tf.float32)
        for s in strides
    ]

    def boxes():
        corner = rng.uniform(0, size * 0.8, (n, k, 2))
        side = np.exp(rng.uniform(np.log(8), np.log(size), (n, k, 2)))
        return tf.constant(
            np.concatenate([corner, np.minimum(corner + side, size)], -1), tf.float32
        )

    box_sets = itertools.cycle([boxes() for _ in range(64)])

    def step(features, rois):
        with tf.GradientTape() as tape:
            tape.watch(features)
            pooled = tfco.multi_scale_roi_align(
                features,
                rois,
                7,
                spatial_scales=[1 / s for s in strides],
                sampling_ratio=2,
            )
        return pooled, tape.gradient(pooled, features)

    return step, lambda: (features, next(box_sets))


def _deform_conv_step(quick):
    n, c, size = (1, 8, 12) if quick else (2, 256, 64)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((n, size, size, c)), tf.float32)
    w = tf.constant(rng.standard_normal((3, 3, c, c)) / (3 * c**0.5), tf.float32)
    offset = tf.constant(rng.standard_normal((n, size, size, 18)), tf.float32)
    mask = tf.constant(rng.uniform(0, 1, (n, size, size, 9)), tf.float32)

    def step(x, w, offset, mask):
        with tf.GradientTape() as tape:
            tape.watch([x, w, offset, mask])
            y = tfco.deform_conv2d(x, offset, w, padding=1, mask=mask)
        return y, tape.gradient(y, [x, w, offset, mask])

    return step, lambda: (x, w, offset, mask)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny cases, to test")
    args = parser.parse_args()
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(benchmark_util.describe_machine())
    print(f"tfco jit lowering: {tfco.build_info()['xla_custom_call_api'] or 'HLO'}")
    steps = {
        name: _roi_step(fn, attrs, channels, args.quick)
        for name, (fn, attrs, channels) in _ROI_OPS.items()
    }
    steps["multi_scale_roi_align"] = _multi_scale_step(args.quick)
    steps["deform_conv2d"] = _deform_conv_step(args.quick)
    print("| forward+backward | no XLA (ms) | jit_compile (ms) | jit / no XLA |")
    print("| --- | --- | --- | --- |")
    # inputs() gives each call's inputs.
    for name, (step, inputs) in steps.items():
        plain = tf.function(step)
        jit = tf.function(step, jit_compile=True)
        x = inputs()
        for a, b in zip(tf.nest.flatten(plain(*x)), tf.nest.flatten(jit(*x))):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4, err_msg=name)
        plain_s, jit_s = benchmark_util.median_seconds(
            [lambda f=f, inputs=inputs: f(*inputs()) for f in (plain, jit)], warmup=2
        )
        print(
            f"| {name} | {plain_s * 1e3:.2f} | {jit_s * 1e3:.2f} | "
            f"{jit_s / plain_s:.2f} |"
        )


if __name__ == "__main__":
    main()
