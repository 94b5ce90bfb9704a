"""CPU benchmark of RoI Align: tfco.roi_align (NHWC and NCHW, and NHWC under
jit_compile=True, lowered by XLA), torchvision's roi_align (if importable) and
a pure-TensorFlow composition (also under XLA, where it compiles), forward and
forward+backward, at 1 and 2 intra-op threads.

    bazel run //tensorflow_customops/python/benchmarks:roi_benchmark [-- --quick]

Each thread count runs in its own Python process, because TensorFlow fixes its
thread pools when the first op runs. Inter-op threads are 1 in both libraries,
so the thread count is the only parallelism. Times are the median of several
repetitions after warm-up; ratios above 1 mean tfco (NHWC) is faster.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

# name: (N, C, H=W, K, output size, repetitions)
_CASES = {
    "small": (1, 64, 32, 64, 7, 20),
    "default": (2, 256, 64, 512, 7, 9),
    "large": (4, 256, 96, 1024, 7, 5),
}
_QUICK_CASES = {"quick": (1, 16, 16, 32, 7, 3)}
_SAMPLING_RATIO = 2
_SPATIAL_SCALE = 1.0 / 16


def _inputs(n, c, size, k, out):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(n, size, size, c)).astype(np.float32)
    extent = size / _SPATIAL_SCALE
    corners = np.sort(rng.uniform(0, extent, size=(k, 2, 2)), axis=1)
    rois = np.concatenate(
        [
            rng.integers(0, n, size=(k, 1)),
            corners[:, 0, :],  # x1, y1
            corners[:, 1, :],  # x2, y2
        ],
        axis=1,
    ).astype(np.float32)
    upstream = rng.normal(size=(k, out, out, c)).astype(np.float32)
    return features, rois, upstream


def _median_ms(fn, repetitions):
    for _ in range(2):
        fn()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _composition(tf, features, rois, output_size):
    """roi_align(aligned=True, sampling_ratio=2) from TensorFlow ops.

    crop_and_resize samples an (output * ratio) grid per box, placed at the
    centres of roi_align's sampling cells; a 1-pixel edge padding reproduces
    roi_align's clamping within one pixel of the border (and its zeros
    beyond, via extrapolation_value); average pooling merges each bin.
    """
    height, width = features.shape[1], features.shape[2]
    padded = tf.pad(features, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")
    grid = output_size * _SAMPLING_RATIO
    # Box edges in padded feature-map pixels, half-pixel shifted as aligned=True.
    x1, y1, x2, y2 = tf.unstack(rois[:, 1:] * _SPATIAL_SCALE + 0.5, axis=1)
    step_y, step_x = (y2 - y1) / grid, (x2 - x1) / grid
    boxes = tf.stack(
        [
            (y1 + step_y / 2) / (height + 1),
            (x1 + step_x / 2) / (width + 1),
            (y2 - step_y / 2) / (height + 1),
            (x2 - step_x / 2) / (width + 1),
        ],
        axis=1,
    )
    samples = tf.image.crop_and_resize(
        padded,
        boxes,
        tf.cast(rois[:, 0], tf.int32),
        [grid, grid],
        extrapolation_value=0.0,
    )
    return tf.nn.avg_pool2d(samples, _SAMPLING_RATIO, _SAMPLING_RATIO, "VALID")


def _gradient_fn(tf, forward, x, dy, jit_compile):
    """features -> d(sum(forward(features) * dy))/d(features), as a tf.function."""

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = forward(x)
        return tape.gradient(y, x, output_gradients=dy)

    return step


def _max_abs_diff(a, b):
    return float(np.max(np.abs(a - b)))


def _bench_tf(tf, tfco, spec, features_np, rois_np, upstream_np):
    _, _, _, _, out, reps = spec
    rois = tf.constant(rois_np)
    align = {
        "spatial_scale": _SPATIAL_SCALE,
        "sampling_ratio": _SAMPLING_RATIO,
        "aligned": True,
    }
    to_nchw = (0, 3, 1, 2)

    def ours(data_format):
        return lambda x: tfco.roi_align(x, rois, out, data_format=data_format, **align)

    def composition(x):
        return _composition(tf, x, rois, out)

    # name: (forward, features, upstream gradient, jit_compile)
    impls = {
        "tfco_nhwc": (ours("NHWC"), features_np, upstream_np, False),
        "tfco_nchw": (
            ours("NCHW"),
            features_np.transpose(to_nchw),
            upstream_np.transpose(to_nchw),
            False,
        ),
        "tfco_jit": (ours("NHWC"), features_np, upstream_np, True),
        "tf_composition": (composition, features_np, upstream_np, False),
        "tf_composition_jit": (composition, features_np, upstream_np, True),
    }
    row, outputs = {}, {}
    for impl, (forward, x, dy, jit) in impls.items():
        x, dy = tf.constant(x), tf.constant(dy)
        fwd = tf.function(lambda f=forward, x=x: f(x), jit_compile=jit)
        try:
            outputs[impl] = fwd().numpy()
        except tf.errors.InvalidArgumentError as error:
            # crop_and_resize has no XLA lowering in TensorFlow.
            row[impl] = (None, None)
            row[impl + "_skipped"] = str(error).splitlines()[0]
            continue
        row[impl] = (
            _median_ms(fwd, reps),
            _median_ms(_gradient_fn(tf, forward, x, dy, jit), reps),
        )
    ours = outputs["tfco_nhwc"]
    row["max_abs_diff_composition"] = _max_abs_diff(outputs["tf_composition"], ours)
    row["max_abs_diff_nchw"] = _max_abs_diff(
        outputs["tfco_nchw"].transpose(0, 2, 3, 1), ours
    )
    row["max_abs_diff_jit"] = _max_abs_diff(outputs["tfco_jit"], ours)
    return row, ours


def _bench_torchvision(torch, tv_roi_align, spec, features_np, rois_np, upstream_np):
    _, _, _, _, out, reps = spec
    features = torch.from_numpy(features_np.transpose(0, 3, 1, 2).copy())
    rois = torch.from_numpy(rois_np)
    dy = torch.from_numpy(upstream_np.transpose(0, 3, 1, 2).copy())
    # One leaf reused, so the backward timing holds no feature-map copy.
    leaf = features.clone().requires_grad_(True)

    def forward(x=features):
        return tv_roi_align(x, rois, out, _SPATIAL_SCALE, _SAMPLING_RATIO, aligned=True)

    def forward_backward():
        leaf.grad = None
        forward(leaf).backward(dy)
        return leaf.grad

    with torch.no_grad():
        output = forward().numpy().transpose(0, 2, 3, 1)
        forward_ms = _median_ms(forward, reps)
    return (forward_ms, _median_ms(forward_backward, reps)), output


def _run_worker(threads, cases):
    # torchvision first: importing it after TensorFlow 2.21 crashes
    # (segmentation fault, seen with torch 2.14 / torchvision 0.29).
    try:
        import torch
        from torchvision.ops import roi_align as tv_roi_align

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        torch_missing = None
    except ImportError as error:
        torch_missing = str(error)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tensorflow_customops as tfco

    results = []
    for name, spec in cases.items():
        n, c, size, k, out, _ = spec
        inputs = _inputs(n, c, size, k, out)
        row, ours = _bench_tf(tf, tfco, spec, *inputs)
        row.update(case=name, threads=threads, shape=(n, c, size, k, out))
        if torch_missing is None:
            row["torchvision"], tv_out = _bench_torchvision(
                torch, tv_roi_align, spec, *inputs
            )
            row["max_abs_diff_torchvision"] = _max_abs_diff(tv_out, ours)
        else:
            row["torchvision_skipped"] = torch_missing
        results.append(row)
    print(json.dumps(results))


def _ms(value):
    return f"{value:9.2f}" if value is not None else "      n/a"


def _ratio(other, ours):
    return f"{other / ours:7.2f}x" if other is not None else "     n/a"


def _print_table(rows):
    header = (
        f"{'case':8} {'thr':>3} {'pass':8} {'tfco NHWC':>9} {'tfco NCHW':>9} "
        f"{'tfco jit':>9} {'torchvis':>9} {'TF comp':>9} {'comp jit':>9} "
        f"{'tv/tfco':>8} {'comp/tfco':>9} {'jit/tfco':>8} {'compjit/jit':>11}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        for index, label in ((0, "fwd"), (1, "fwd+bwd")):
            ours = row["tfco_nhwc"][index]
            tv = row["torchvision"][index] if "torchvision" in row else None
            comp = row["tf_composition"][index]
            jit = row["tfco_jit"][index]
            comp_jit = row["tf_composition_jit"][index]
            print(
                f"{row['case']:8} {row['threads']:3d} {label:8} {_ms(ours)} "
                f"{_ms(row['tfco_nchw'][index])} {_ms(jit)} {_ms(tv)} {_ms(comp)} "
                f"{_ms(comp_jit)} {_ratio(tv, ours)} {_ratio(comp, ours):>9} "
                f"{_ratio(jit, ours)} {_ratio(comp_jit, jit):>11}"
            )
    print()
    print(
        "times in ms (median); ratios: other time / tfco NHWC time (>1: tfco "
        "faster), except jit/tfco = tfco jit time / tfco NHWC time (the cost of "
        "XLA's lowering) and compjit/jit = composition jit time / tfco jit time"
    )
    for row in rows:
        n, c, size, k, out = row["shape"]
        diffs = (
            f"NCHW vs NHWC {row['max_abs_diff_nchw']:.3g}, "
            f"jit {row['max_abs_diff_jit']:.3g}, "
        )
        if "torchvision" in row:
            diffs += f"torchvision {row['max_abs_diff_torchvision']:.3g}, "
        diffs += f"TF composition {row['max_abs_diff_composition']:.3g}"
        print(
            f"{row['case']} (threads={row['threads']}): N={n} C={c} H=W={size} K={k} "
            f"{out}x{out} sampling_ratio={_SAMPLING_RATIO} aligned=True; "
            f"max |other - tfco NHWC| forward: {diffs}"
        )
        for skipped in ("torchvision_skipped", "tf_composition_jit_skipped"):
            if skipped in row:
                print(f"  {skipped.replace('_skipped', '')} skipped: {row[skipped]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny case, smoke run")
    parser.add_argument("--threads", default="1,2", help="comma-separated counts")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    cases = _QUICK_CASES if args.quick else _CASES
    if args.worker:
        _run_worker(args.worker, cases)
        return
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        command = [sys.executable, __file__, "--worker", str(threads)]
        if args.quick:
            command.append("--quick")
        worker = subprocess.run(
            command,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            capture_output=True,
            text=True,
        )
        if worker.returncode:
            sys.exit(
                f"worker for {threads} thread(s) exited with {worker.returncode}:\n"
                f"{worker.stderr}"
            )
        rows.extend(json.loads(worker.stdout.strip().splitlines()[-1]))
    _print_table(rows)


if __name__ == "__main__":
    main()
