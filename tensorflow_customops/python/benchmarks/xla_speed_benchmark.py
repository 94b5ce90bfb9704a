"""CPU benchmark of what jit_compile=True costs or saves on the installed
TensorFlow release: forward+backward steps of the RoI ops (RoiAlign, RoiPool,
PsRoiAlign, PsRoiPool) and of DeformableConv2d, each in a tf.function with
and without jit_compile, side by side (benchmark_util.median_seconds), with
the XLA interface the lowerings use (build_info()["xla_custom_call_api"]).

    bazel run //tensorflow_customops/python/benchmarks:xla_speed_benchmark

tools/wheel_matrix.sh runs it, and roi_layer_fit_benchmark, in each
release's virtualenv when BENCHMARKS names them (docs/benchmarks.md). The
cases are roi_benchmark's "default" (N=2, C=256, 64x64, K=512, 7x7; the
position-sensitive ops with C=392) and deform_conv2d_benchmark's (N=2,
C=O=256, 64x64, 3x3, with a mask).
A step returns the output and the gradients of the features (and of the
offsets, mask and filter), as a training step needs them.
"""

import argparse

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

    return step, (features, rois)


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

    return step, (x, w, offset, mask)


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
    steps["deform_conv2d"] = _deform_conv_step(args.quick)
    print("| forward+backward | no XLA (ms) | jit_compile (ms) | jit / no XLA |")
    print("| --- | --- | --- | --- |")
    for name, (step, inputs) in steps.items():
        plain = tf.function(step)
        jit = tf.function(step, jit_compile=True)
        for a, b in zip(tf.nest.flatten(plain(*inputs)), tf.nest.flatten(jit(*inputs))):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4, err_msg=name)
        plain_s, jit_s = benchmark_util.median_seconds(
            [lambda f=f, x=inputs: f(*x) for f in (plain, jit)], warmup=2
        )
        print(
            f"| {name} | {plain_s * 1e3:.2f} | {jit_s * 1e3:.2f} | "
            f"{jit_s / plain_s:.2f} |"
        )


if __name__ == "__main__":
    main()
