"""CPU benchmark of tfco.deform_conv2d (float32), also under jit_compile=True:
against torchvision's CPU kernel (if importable) and the fastest
pure-TensorFlow composition here (gather-based bilinear sampling and a matrix
product), each in a tf.function, also under jit_compile=True, forward and
forward+backward (the gradients only: graphs drop the forward output), at 1
and 2 intra-op threads; and the peak memory of a forward+backward step of
each.

    bazel run //tensorflow_customops/python/benchmarks:deform_conv2d_benchmark \\
        [-- --quick]

The case is the issue's: N=2, C=O=256, 64x64, 3x3, padding 1, one offset
group, with a mask, NHWC for tfco and the composition, NCHW for torchvision.
Each thread count runs in its own Python process (TensorFlow fixes its pools
at the first op), candidates called in turn (benchmark_util.median_seconds).
A forward+backward step returns the gradients of input, offset, mask and
filter. Peak memory: each candidate's step runs alone in a fresh process, and
the figure is the process's peak resident set during that step (VmHWM,
reset just before it) minus its resident set before it (inputs made,
libraries loaded).
"""

import argparse
import json
import subprocess
import sys

import numpy as np

_CASES = {
    "default": (2, 256, 64, 256, 3, 1),  # N, C, H=W, O, k, padding
    "quick": (1, 16, 16, 16, 3, 1),
}
_CANDIDATES = ("tfco", "tfco_jit", "torchvision", "composition", "composition_jit")


def _inputs(n, c, size, o, k):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, size, size, c)).astype(np.float32)
    offset = rng.normal(size=(n, size, size, 2 * k * k)).astype(np.float32)
    mask = rng.uniform(size=(n, size, size, k * k)).astype(np.float32)
    filt = (rng.normal(size=(k, k, c, o)) / np.sqrt(k * k * c)).astype(np.float32)
    dy = rng.normal(size=(n, size, size, o)).astype(np.float32)
    return x, offset, mask, filt, dy


def _composition(tf, x, offset, mask, filt, pad):
    """Deformable convolution from TensorFlow ops: the four corners of every
    sample gathered from the flattened map (0 off the map, as torchvision),
    weighted, masked, and multiplied with the filter as one matrix."""
    n, h, w, c = x.shape
    kh, kw, _, o = filt.shape
    _, ho, wo, _ = offset.shape
    taps = kh * kw
    tap_y = tf.cast(tf.repeat(tf.range(kh), kw), x.dtype)
    tap_x = tf.cast(tf.tile(tf.range(kw), [kh]), x.dtype)
    rows = tf.cast(tf.range(ho) - pad, x.dtype)[None, :, None, None]
    cols = tf.cast(tf.range(wo) - pad, x.dtype)[None, None, :, None]
    y = rows + tap_y + offset[..., 0::2]
    xs = cols + tap_x + offset[..., 1::2]
    inside = (y > -1) & (y < h) & (xs > -1) & (xs < w)
    y0, x0 = tf.floor(y), tf.floor(xs)
    ly, lx = y - y0, xs - x0
    flat = tf.reshape(x, [n * h * w, c])
    image = tf.range(n)[:, None, None, None] * (h * w)
    total = 0.0
    for dy, wy in ((0.0, 1 - ly), (1.0, ly)):
        for dx, wx in ((0.0, 1 - lx), (1.0, lx)):
            yy, xx = y0 + dy, x0 + dx
            valid = inside & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            index = (
                image
                + tf.cast(tf.clip_by_value(yy, 0, h - 1), tf.int32) * w
                + tf.cast(tf.clip_by_value(xx, 0, w - 1), tf.int32)
            )
            weight = tf.where(valid, wy * wx * mask, 0.0)
            total += tf.gather(flat, index) * weight[..., None]
    columns = tf.reshape(total, [n * ho * wo, taps * c])
    out = tf.matmul(columns, tf.reshape(filt, [taps * c, o]))
    return tf.reshape(out, [n, ho, wo, o])


def _tf_steps(tf, tfco, name, arrays, pad):
    x, offset, mask, filt, dy = (tf.constant(a) for a in arrays)
    inputs = [x, offset, mask, filt]

    if name.startswith("tfco"):

        def forward(x, offset, mask, filt):
            return tfco.deform_conv2d(x, offset, filt, padding=pad, mask=mask)

    else:

        def forward(x, offset, mask, filt):
            return _composition(tf, x, offset, mask, filt, pad)

    def step(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = forward(*inputs)
        return tape.gradient(y, inputs, output_gradients=dy)

    # Every TensorFlow candidate in a tf.function, so that each step drops
    # the forward pass it does not return, as graphs and XLA do.
    jit = name.endswith("_jit")
    forward = tf.function(forward, jit_compile=jit)
    step = tf.function(step, jit_compile=jit)
    return (
        lambda: forward(*inputs).numpy(),
        lambda: [g.numpy() for g in step(*inputs)],
        lambda: forward(*inputs).numpy(),
    )


def _torch_steps(torch, tv_ops, arrays, pad):
    def nchw(a):
        return torch.from_numpy(np.ascontiguousarray(a.transpose(0, 3, 1, 2)))

    x, offset, mask, filt, dy = arrays
    leaves = [nchw(x), nchw(offset), nchw(mask)]
    leaves.append(torch.from_numpy(np.ascontiguousarray(filt.transpose(3, 2, 0, 1))))
    leaves = [t.requires_grad_(True) for t in leaves]
    dy = nchw(dy)

    def call(x, offset, mask, weight):
        return tv_ops.deform_conv2d(x, offset, weight, padding=pad, mask=mask)

    def forward():
        with torch.no_grad():
            return call(*leaves)

    def step():
        for t in leaves:
            t.grad = None
        call(*leaves).backward(dy)
        return [t.grad for t in leaves]

    return forward, step, lambda: forward().numpy().transpose(0, 2, 3, 1)


def _import(threads):
    """torch first (importing it after TensorFlow crashes), then TensorFlow,
    both with `threads` intra-op threads and one inter-op thread."""
    try:
        import torch
        import torchvision.ops as tv_ops

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
    except ImportError:
        torch = tv_ops = None
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tensorflow_customops as tfco

    return torch, tv_ops, tf, tfco


def _steps(name, modules, arrays, pad):
    torch, tv_ops, tf, tfco = modules
    if name == "torchvision":
        if torch is None:
            return None
        return _torch_steps(torch, tv_ops, arrays, pad)
    return _tf_steps(tf, tfco, name, arrays, pad)


def _time_worker(case, threads):
    modules = _import(threads)
    # After torch: benchmark_util imports TensorFlow.
    from tensorflow_customops.python.benchmarks import benchmark_util

    n, c, size, o, k, pad = _CASES[case]
    arrays = _inputs(n, c, size, o, k)
    steps = {name: _steps(name, modules, arrays, pad) for name in _CANDIDATES}
    steps = {name: s for name, s in steps.items() if s is not None}
    reference = steps["tfco"][2]()
    result = {"machine": benchmark_util.describe_machine()}
    for name, (_, _, output) in steps.items():
        result[f"max_abs_diff_{name}"] = float(np.abs(output() - reference).max())
    for index, label in ((0, "fwd"), (1, "fwd+bwd")):
        seconds = benchmark_util.median_seconds(
            [s[index] for s in steps.values()], warmup=2, min_repeats=5
        )
        result[label] = dict(zip(steps, seconds))
    print(json.dumps(result))


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def _memory_worker(case, threads, name):
    modules = _import(threads)
    n, c, size, o, k, pad = _CASES[case]
    steps = _steps(name, modules, _inputs(n, c, size, o, k), pad)
    if steps is None:
        print(json.dumps(None))
        return
    # Linux: writing 5 to clear_refs resets the peak resident set (VmHWM).
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS")
    steps[1]()
    print(json.dumps((_status_kib("VmHWM") - before) / 1024))


def _run(*args):
    worker = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True
    )
    if worker.returncode:
        raise RuntimeError(f"worker {args} failed:\n{worker.stderr[-3000:]}")
    return json.loads(worker.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny case, to test")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, case, threads, *rest = args.worker
        if kind == "time":
            _time_worker(case, int(threads))
        else:
            _memory_worker(case, int(threads), rest[0])
        return
    case = "quick" if args.quick else "default"
    n, c, size, o, k, pad = _CASES[case]
    print(f"deform_conv2d float32: N={n} C={c} {size}x{size} O={o} {k}x{k} pad {pad}")
    timings = {t: _run("--worker", "time", case, str(t)) for t in (1, 2)}
    print(timings[1]["machine"])
    names = [name for name in _CANDIDATES if name in timings[1]["fwd"]]
    print(f"{'pass':8} {'thr':>3} " + " ".join(f"{name:>16}" for name in names))
    for label in ("fwd", "fwd+bwd"):
        for threads in (1, 2):
            row = timings[threads][label]
            ours = row["tfco"]
            cells = [
                f"{row[name] * 1e3:8.1f} ms" + (f" {row[name] / ours:4.1f}x")
                for name in names
            ]
            print(f"{label:8} {threads:3d} " + " ".join(f"{c:>16}" for c in cells))
        scaling = timings[1][label]["tfco"] / timings[2][label]["tfco"]
        print(f"{label:8} tfco 1 -> 2 threads: {scaling:.2f}x")
    print(
        "max |other - tfco| forward: "
        + ", ".join(
            f"{name} {timings[1][f'max_abs_diff_{name}']:.2g}"
            for name in names
            if name != "tfco"
        )
    )
    memory = {name: _run("--worker", "memory", case, "2", name) for name in names}
    print(
        "peak memory of one forward+backward step above the inputs (MiB): "
        + ", ".join(f"{name} {memory[name]:.0f}" for name in names)
    )


if __name__ == "__main__":
    main()
