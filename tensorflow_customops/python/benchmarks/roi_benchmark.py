"""CPU benchmark of the RoI ops (RoiAlign, RoiPool, PsRoiAlign, PsRoiPool):
tfco in NHWC and NCHW, torchvision (if importable) and a pure-TensorFlow
composition, forward and forward+backward, at 1 and 2 intra-op threads;
tfco also under jit_compile=True (lowered by XLA: custom calls into the
kernels where the build has them, else HLO; TFCO_XLA_LOWERING=hlo picks HLO);
RoiAlign's composition under jit and RoiAlign in half and bfloat16; and the
eager cost of each form of boxes (`--ops=box_forms`).

    bazel run //tensorflow_customops/python/benchmarks:roi_benchmark [-- --quick]

Each thread count runs in its own Python process, because TensorFlow fixes its
thread pools when the first op runs. Inter-op threads are 1 in both libraries,
so the thread count is the only parallelism. Candidates are called in turn,
one call each per round, and each one's median is reported; ratios above 1
mean tfco (NHWC) is faster. A forward+backward step returns the pooled output
and the feature gradient, as a training step needs both.
"""

import argparse
import json
import os

import numpy as np

from tensorflow_customops.python.benchmarks import benchmark_util

# name: (N, C, H=W, K, output size, rounds). The position-sensitive ops take
# C = 49 * C_out channels (7 x 7 bins); their cases use C_out = C // 32.
_CASES = {
    "small": (1, 64, 32, 64, 7, 20),
    "default": (2, 256, 64, 512, 7, 9),
    "large": (4, 256, 96, 1024, 7, 5),
}
_QUICK_CASES = {"quick": (1, 16, 16, 32, 7, 3)}
# Cases per op: the large case only for RoiAlign, to bound the run time.
_OP_CASES = {
    "roi_align": ("small", "default", "large"),
    "roi_pool": ("small", "default"),
    "ps_roi_align": ("small", "default"),
    "ps_roi_pool": ("small", "default"),
}
# Box forms: eager roi_align calls (NHWC, forward) with per-image boxes against
# the same boxes as [K, 5] rows. name: (N, C, H=W, boxes per image, output
# size, rounds); with box_counts, every other image holds 3/4 of its boxes.
_BOX_FORMS = "box_forms"
_BOX_FORM_CASES = {
    "small": (2, 64, 32, 32, 7, 600),
    "default": (2, 256, 64, 256, 7, 80),
}
_QUICK_BOX_FORM_CASES = {"quick": (2, 16, 16, 8, 7, 5)}
# RoiAlign in reduced precision on the default case: tfco NHWC only.
_LOW_PRECISION_CASE = "default"
_SAMPLING_RATIO = 2
_SPATIAL_SCALE = 1.0 / 16


def _channels(op, c, out):
    if op.startswith("ps_"):
        return max(1, c // 32) * out * out
    return c


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
    return features, rois


# Compositions: each op from TensorFlow ops only, in NHWC.


def _padded_sampling_boxes(tf, height, width, y1, x1, y2, x2, grid):
    """crop_and_resize boxes whose grid x grid samples sit at the centres of
    roi_align's sampling cells in [y1, y2] x [x1, x2] (feature-map pixels of a
    map edge-padded by 1), normalised as crop_and_resize wants them."""
    step_y, step_x = (y2 - y1) / grid, (x2 - x1) / grid
    return tf.stack(
        [
            (y1 + step_y / 2) / (height + 1),
            (x1 + step_x / 2) / (width + 1),
            (y2 - step_y / 2) / (height + 1),
            (x2 - step_x / 2) / (width + 1),
        ],
        axis=-1,
    )


def _roi_align_composition(tf, features, rois, out):
    """roi_align(aligned=True, sampling_ratio=2): crop_and_resize onto the
    sampling grid of an edge-padded map (the padding reproduces roi_align's
    clamping within one pixel of the border, extrapolation_value its zeros
    beyond), then average pooling of each bin's samples."""
    height, width = features.shape[1], features.shape[2]
    padded = tf.pad(features, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")
    grid = out * _SAMPLING_RATIO
    # Half-pixel shift of aligned=True, plus one for the padding.
    x1, y1, x2, y2 = tf.unstack(rois[:, 1:] * _SPATIAL_SCALE + 0.5, axis=1)
    boxes = _padded_sampling_boxes(tf, height, width, y1, x1, y2, x2, grid)
    samples = tf.image.crop_and_resize(
        padded,
        boxes,
        tf.cast(rois[:, 0], tf.int32),
        [grid, grid],
        extrapolation_value=0.0,
    )
    return tf.nn.avg_pool2d(samples, _SAMPLING_RATIO, _SAMPLING_RATIO, "VALID")


def _by_bin_group(tf, features, out):
    """[N, H, W, C_out * bins] -> [N * bins, H, W, C_out]: the channels each
    bin of the position-sensitive ops reads, as a map of their own."""
    n, height, width, c = features.shape
    bins = out * out
    grouped = tf.reshape(features, [n, height, width, c // bins, bins])
    grouped = tf.transpose(grouped, [0, 4, 1, 2, 3])
    return tf.reshape(grouped, [n * bins, height, width, c // bins])


def _bin_edges(tf, start, end, out):
    """[K, out] starts and ends of the bins of boxes [start, end]."""
    size = (end - start)[:, None] / out
    index = tf.range(out, dtype=start.dtype)[None, :]
    return start[:, None] + index * size, start[:, None] + (index + 1) * size


def _ps_roi_align_composition(tf, features, rois, out):
    """ps_roi_align(sampling_ratio=2): each bin's channel group is its own
    map (one transpose), and crop_and_resize samples each bin's 2 x 2 grid in
    its group, averaged."""
    n, height, width, c = features.shape
    bins = out * out
    grouped = _by_bin_group(tf, features, out)
    padded = tf.pad(grouped, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")
    x1, y1, x2, y2 = tf.unstack(rois[:, 1:] * _SPATIAL_SCALE + 0.5, axis=1)
    ys, ye = _bin_edges(tf, y1, y2, out)
    xs, xe = _bin_edges(tf, x1, x2, out)
    # [K, out, out] bin boxes, ph major.
    shape = [rois.shape[0], out, out]
    y_lo, y_hi = (tf.broadcast_to(y[:, :, None], shape) for y in (ys, ye))
    x_lo, x_hi = (tf.broadcast_to(x[:, None, :], shape) for x in (xs, xe))
    boxes = _padded_sampling_boxes(
        tf, height, width, y_lo, x_lo, y_hi, x_hi, _SAMPLING_RATIO
    )
    group_index = tf.cast(rois[:, 0], tf.int32)[:, None] * bins + tf.range(bins)
    samples = tf.image.crop_and_resize(
        padded,
        tf.reshape(boxes, [-1, 4]),
        tf.reshape(group_index, [-1]),
        [_SAMPLING_RATIO, _SAMPLING_RATIO],
        extrapolation_value=0.0,
    )
    pooled = tf.reduce_mean(samples, axis=[1, 2])
    return tf.reshape(pooled, [-1, out, out, c // bins])


def _pool_bins(tf, start, end, out, size, position_sensitive):
    """Integer bin bounds [K, out] as torchvision's pooling ops round them."""
    start = tf.floor(start * _SPATIAL_SCALE + 0.5)
    end = tf.floor(end * _SPATIAL_SCALE + 0.5)
    extent = tf.maximum(end - start + (0.0 if position_sensitive else 1.0), 1.0)
    bin_size = extent[:, None] / out
    index = tf.range(out, dtype=tf.float32)[None, :]
    limit = size - 1 if position_sensitive else size
    lo = tf.clip_by_value(tf.floor(index * bin_size) + start[:, None], 0, limit)
    hi = tf.clip_by_value(
        tf.math.ceil((index + 1) * bin_size) + start[:, None], 0, limit
    )
    return tf.cast(lo, tf.int32), tf.cast(hi, tf.int32)


def _ps_roi_pool_composition(tf, features, rois, out):
    """ps_roi_pool exactly (up to rounding): each bin's average is four
    lookups in the integral image (cumulative sums) of its channel group."""
    n, height, width, c = features.shape
    bins = out * out
    grouped = _by_bin_group(tf, features, out)
    integral = tf.pad(
        tf.cumsum(tf.cumsum(grouped, axis=1), axis=2), [[0, 0], [1, 0], [1, 0], [0, 0]]
    )
    h_lo, h_hi = _pool_bins(tf, rois[:, 2], rois[:, 4], out, height, True)
    w_lo, w_hi = _pool_bins(tf, rois[:, 1], rois[:, 3], out, width, True)
    group = tf.cast(rois[:, 0], tf.int32)[:, None, None] * bins + tf.reshape(
        tf.range(bins), [1, out, out]
    )

    def corner(h, w):
        h = tf.broadcast_to(h[:, :, None], group.shape)
        w = tf.broadcast_to(w[:, None, :], group.shape)
        return tf.gather_nd(integral, tf.stack([group, h, w], axis=-1))

    total = (
        corner(h_hi, w_hi)
        - corner(h_lo, w_hi)
        - corner(h_hi, w_lo)
        + corner(h_lo, w_lo)
    )
    area = tf.cast((h_hi - h_lo)[:, :, None] * (w_hi - w_lo)[:, None, :], tf.float32)[
        ..., None
    ]
    return tf.math.divide_no_nan(total, area)


def _roi_pool_composition(tf, features, rois, out):
    """The usual TensorFlow stand-in for roi_pool (as in TensorFlow ports of
    Faster R-CNN): nearest-neighbour crop_and_resize onto a 2 x 2 grid per bin,
    then max pooling. It takes the maximum of 4 pixels per bin rather than of
    every pixel in the bin, so it is not the same function."""
    height, width = features.shape[1], features.shape[2]
    x1, y1, x2, y2 = tf.unstack(rois[:, 1:] * _SPATIAL_SCALE, axis=1)
    boxes = tf.stack(
        [y1 / (height - 1), x1 / (width - 1), y2 / (height - 1), x2 / (width - 1)],
        axis=1,
    )
    grid = 2 * out
    samples = tf.image.crop_and_resize(
        features,
        boxes,
        tf.cast(rois[:, 0], tf.int32),
        [grid, grid],
        method="nearest",
    )
    return tf.nn.max_pool2d(samples, 2, 2, "VALID")


_COMPOSITIONS = {
    "roi_align": _roi_align_composition,
    "roi_pool": _roi_pool_composition,
    "ps_roi_align": _ps_roi_align_composition,
    "ps_roi_pool": _ps_roi_pool_composition,
}


def _tfco_forward(tfco, op, rois, out, data_format):
    fn = getattr(tfco, op)
    kwargs = {"spatial_scale": _SPATIAL_SCALE, "data_format": data_format}
    if op == "roi_align":
        kwargs.update(sampling_ratio=_SAMPLING_RATIO, aligned=True)
    elif op == "ps_roi_align":
        kwargs.update(sampling_ratio=_SAMPLING_RATIO)
    return lambda x: fn(x, rois, out, **kwargs)


def _step_fns(tf, forward, x, jit_compile):
    """(forward, forward+backward) as tf.functions of the fixed features x;
    the second returns the output and d(sum(output * dy))/d(features)."""
    fwd = tf.function(lambda: forward(x), jit_compile=jit_compile)
    dy = tf.constant(np.random.default_rng(1).normal(size=fwd().shape), x.dtype)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = forward(x)
        return y, tape.gradient(y, x, output_gradients=dy)

    return fwd, step


def _max_abs_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def _bench_tf(tf, tfco, op, spec, features_np, rois_np):
    out, rounds = spec[4], spec[5]
    rois = tf.constant(rois_np)
    to_nchw = (0, 3, 1, 2)
    composition = _COMPOSITIONS[op]
    # name: (forward, features, jit_compile)
    impls = {
        "tfco_nhwc": (_tfco_forward(tfco, op, rois, out, "NHWC"), features_np, False),
        "tfco_nchw": (
            _tfco_forward(tfco, op, rois, out, "NCHW"),
            features_np.transpose(to_nchw),
            False,
        ),
        "tf_composition": (lambda x: composition(tf, x, rois, out), features_np, False),
    }
    impls["tfco_jit"] = (impls["tfco_nhwc"][0], features_np, True)
    if op == "roi_align":
        impls["tf_composition_jit"] = (impls["tf_composition"][0], features_np, True)
    custom_calls = tfco.build_info()["xla_custom_calls"]
    row, outputs, fns = {}, {}, {}
    row["xla_lowering"] = (
        "custom calls"
        if custom_calls and os.environ.get("TFCO_XLA_LOWERING") != "hlo"
        else "HLO"
    )
    for impl, (forward, x, jit) in impls.items():
        try:
            fwd, step = _step_fns(tf, forward, tf.constant(x), jit)
            outputs[impl] = fwd().numpy()
            step()
        except tf.errors.InvalidArgumentError as error:
            # crop_and_resize has no XLA lowering in TensorFlow.
            row[impl] = (None, None)
            row[impl + "_skipped"] = str(error).splitlines()[0]
            continue
        fns[impl] = (fwd, step)
    names = list(fns)
    for index in (0, 1):
        times = benchmark_util.median_ms([fns[name][index] for name in names], rounds)
        for name, ms in zip(names, times):
            row.setdefault(name, [None, None])[index] = ms
    ours = outputs["tfco_nhwc"]
    row["max_abs_diff_composition"] = _max_abs_diff(outputs["tf_composition"], ours)
    row["max_abs_diff_nchw"] = _max_abs_diff(
        outputs["tfco_nchw"].transpose(0, 2, 3, 1), ours
    )
    if "tfco_jit" in outputs:
        row["max_abs_diff_jit"] = _max_abs_diff(outputs["tfco_jit"], ours)
    return row, ours


def _bench_low_precision(tf, tfco, spec, features_np, rois_np):
    """RoiAlign NHWC in float32, float16 and bfloat16, timed in turn."""
    out, rounds = spec[4], spec[5]
    forward = _tfco_forward(tfco, "roi_align", tf.constant(rois_np), out, "NHWC")
    dtypes = {"float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}
    fns = {
        name: _step_fns(tf, forward, tf.constant(features_np, dtype), False)
        for name, dtype in dtypes.items()
    }
    row = {}
    for index in (0, 1):
        times = benchmark_util.median_ms([fns[name][index] for name in dtypes], rounds)
        for name, ms in zip(dtypes, times):
            row.setdefault(name, [None, None])[index] = ms
    return row


def _bench_box_forms(tf, tfco, spec):
    """Eager roi_align with [N, K, 4] boxes, with box_counts, and as a
    RaggedTensor, each timed in turn with the [K, 5] rows of the same boxes;
    the results must equal the rows' bit for bit."""
    n, c, size, per_image, out, rounds = spec
    features_np, rows_np = _inputs(n, c, size, n * per_image, out)
    rows_np[:, 0] = np.repeat(np.arange(n), per_image)
    boxes_np = rows_np[:, 1:].reshape(n, per_image, 4)
    counts = np.where(np.arange(n) % 2, per_image * 3 // 4, per_image)
    real = np.arange(per_image) < counts[:, None]
    features = tf.constant(features_np)
    boxes = tf.constant(boxes_np)
    rows = tf.constant(rows_np)
    real_rows = tf.constant(rows_np[real.reshape(-1)])
    box_counts = tf.constant(counts, tf.int32)
    ragged = tf.RaggedTensor.from_row_lengths(boxes_np[real], counts)
    kwargs = {
        "spatial_scale": _SPATIAL_SCALE,
        "sampling_ratio": _SAMPLING_RATIO,
        "aligned": True,
    }
    fns = {
        "rows": lambda: tfco.roi_align(features, rows, out, **kwargs),
        "padded": lambda: tfco.roi_align(features, boxes, out, **kwargs),
        "real_rows": lambda: tfco.roi_align(features, real_rows, out, **kwargs),
        "counts": lambda: tfco.roi_align(
            features, boxes, out, box_counts=box_counts, **kwargs
        ),
        "ragged": lambda: tfco.roi_align(features, ragged, out, **kwargs),
    }
    results = {name: fn() for name, fn in fns.items()}
    equal = (
        np.array_equal(
            results["padded"].numpy().reshape(results["rows"].shape),
            results["rows"].numpy(),
        )
        and np.array_equal(
            results["counts"].numpy()[real], results["real_rows"].numpy()
        )
        and not np.any(results["counts"].numpy()[~real])
        and np.array_equal(
            results["ragged"].flat_values.numpy(), results["real_rows"].numpy()
        )
    )
    if not equal:
        raise AssertionError("a box form's result differs from the rows' result")
    times = benchmark_util.median_ms(list(fns.values()), rounds)
    row = dict(zip(fns, times))
    row["shape"] = (n, c, size, per_image, out)
    return row


def _bench_torchvision(torch, tv_ops, op, spec, features_np, rois_np):
    out, rounds = spec[4], spec[5]
    features = torch.from_numpy(features_np.transpose(0, 3, 1, 2).copy())
    rois = torch.from_numpy(rois_np)
    fn = getattr(tv_ops, op)
    args = (out, _SPATIAL_SCALE)
    kwargs = {}
    if op == "roi_align":
        args += (_SAMPLING_RATIO,)
        kwargs["aligned"] = True
    elif op == "ps_roi_align":
        args += (_SAMPLING_RATIO,)
    with torch.no_grad():
        shape = fn(features, rois, *args, **kwargs).shape
    dy = torch.from_numpy(
        np.random.default_rng(1).normal(size=shape).astype(np.float32)
    )
    # One leaf reused, so the backward timing holds no feature-map copy.
    leaf = features.clone().requires_grad_(True)

    def forward():
        with torch.no_grad():
            return fn(features, rois, *args, **kwargs)

    def forward_backward():
        leaf.grad = None
        y = fn(leaf, rois, *args, **kwargs)
        y.backward(dy)
        return y, leaf.grad

    output = forward().numpy().transpose(0, 2, 3, 1)
    return tuple(
        benchmark_util.median_ms([forward], rounds)
        + benchmark_util.median_ms([forward_backward], rounds)
    ), output


def _run_worker(threads, cases, op_cases, box_form_cases):
    # torchvision first: importing it after TensorFlow 2.21 crashes
    # (segmentation fault, seen with torch 2.14 / torchvision 0.29).
    try:
        import torch
        import torchvision.ops as tv_ops

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
    for op, names in op_cases.items():
        for name in names:
            n, c, size, k, out, _ = spec = cases[name]
            c = _channels(op, c, out)
            features_np, rois_np = _inputs(n, c, size, k, out)
            row, ours = _bench_tf(tf, tfco, op, spec, features_np, rois_np)
            row.update(op=op, case=name, threads=threads, shape=(n, c, size, k, out))
            if torch_missing is None:
                row["torchvision"], tv_out = _bench_torchvision(
                    torch, tv_ops, op, spec, features_np, rois_np
                )
                row["max_abs_diff_torchvision"] = _max_abs_diff(tv_out, ours)
            else:
                row["torchvision_skipped"] = torch_missing
            results.append(row)
    if "roi_align" in op_cases:
        name = (
            _LOW_PRECISION_CASE if _LOW_PRECISION_CASE in cases else next(iter(cases))
        )
        spec = cases[name]
        row = _bench_low_precision(tf, tfco, spec, *_inputs(*spec[:5]))
        row.update(op="roi_align dtypes", case=name, threads=threads)
        results.append(row)
    for name, spec in box_form_cases.items():
        row = _bench_box_forms(tf, tfco, spec)
        row.update(op=_BOX_FORMS, case=name, threads=threads)
        results.append(row)
    print(json.dumps(results))


def _ms(value, digits=2):
    return f"{value:9.{digits}f}" if value is not None else "      n/a"


def _ratio(other, ours):
    return f"{other / ours:7.2f}x" if other is not None and ours else "     n/a"


def _print_header(title, header):
    print(title)
    print(header)
    print("-" * len(header))


def _print_op_table(op, rows):
    comp_jit = op == "roi_align"
    header = (
        f"{'case':8} {'thr':>3} {'pass':8} {'tfco NHWC':>9} {'tfco NCHW':>9} "
        f"{'tfco jit':>9} {'torchvis':>9} {'TF comp':>9} "
        + (f"{'comp jit':>9} " if comp_jit else "")
        + f"{'tv/tfco':>8} {'comp/tfco':>9} {'NCHW/NHWC':>9} {'jit/tfco':>8}"
    )
    _print_header(f"== {op} (tfco jit: {rows[0]['xla_lowering']})", header)
    for row in rows:
        for index, label in ((0, "fwd"), (1, "fwd+bwd")):
            ours = row["tfco_nhwc"][index]
            nchw = row["tfco_nchw"][index]
            tv = row["torchvision"][index] if "torchvision" in row else None
            comp = row["tf_composition"][index]
            line = f"{row['case']:8} {row['threads']:3d} {label:8} "
            line += f"{_ms(ours)} {_ms(nchw)} {_ms(row['tfco_jit'][index])} "
            line += f"{_ms(tv)} {_ms(comp)} "
            if comp_jit:
                line += f"{_ms(row['tf_composition_jit'][index])} "
            line += (
                f"{_ratio(tv, ours)} {_ratio(comp, ours):>9} {_ratio(nchw, ours):>9}"
                f" {_ratio(row['tfco_jit'][index], ours)}"
            )
            print(line)
    print()
    for row in rows:
        n, c, size, k, out = row["shape"]
        diffs = f"NCHW vs NHWC {row['max_abs_diff_nchw']:.3g}, "
        if "max_abs_diff_jit" in row:
            diffs += f"jit {row['max_abs_diff_jit']:.3g}, "
        if "torchvision" in row:
            diffs += f"torchvision {row['max_abs_diff_torchvision']:.3g}, "
        diffs += f"TF composition {row['max_abs_diff_composition']:.3g}"
        print(
            f"{row['case']} (threads={row['threads']}): N={n} C={c} H=W={size} K={k} "
            f"{out}x{out}; max |other - tfco NHWC| forward: {diffs}"
        )
        for skipped in ("torchvision_skipped", "tf_composition_jit_skipped"):
            if skipped in row:
                print(f"  {skipped.replace('_skipped', '')} skipped: {row[skipped]}")
    print()


def _print_dtype_table(rows):
    header = (
        f"{'case':8} {'thr':>3} {'pass':8} {'float32':>9} {'float16':>9} "
        f"{'bfloat16':>9} {'f16/f32':>8} {'bf16/f32':>8}"
    )
    _print_header("== roi_align (tfco NHWC) by dtype", header)
    for row in rows:
        for index, label in ((0, "fwd"), (1, "fwd+bwd")):
            f32, f16, bf16 = (row[t][index] for t in ("float32", "float16", "bfloat16"))
            print(
                f"{row['case']:8} {row['threads']:3d} {label:8} {_ms(f32)} {_ms(f16)} "
                f"{_ms(bf16)} {_ratio(f16, f32)} {_ratio(bf16, f32)}"
            )
    print()


def _print_box_form_table(rows):
    header = (
        f"{'case':8} {'thr':>3} {'rows':>9} {'[N,K,4]':>9} {'ratio':>7} "
        f"{'rows':>9} {'+counts':>9} {'ratio':>7} {'ragged':>9} {'ratio':>7}"
    )
    _print_header("== roi_align eager, forward: box forms against [K, 5] rows", header)
    for row in rows:
        print(
            f"{row['case']:8} {row['threads']:3d} {_ms(row['rows'], 3)} "
            f"{_ms(row['padded'], 3)} {_ratio(row['padded'], row['rows'])} "
            f"{_ms(row['real_rows'], 3)} {_ms(row['counts'], 3)} "
            f"{_ratio(row['counts'], row['real_rows'])} {_ms(row['ragged'], 3)} "
            f"{_ratio(row['ragged'], row['real_rows'])}"
        )
    print()
    for row in rows:
        n, c, size, per_image, out = row["shape"]
        print(
            f"{row['case']} (threads={row['threads']}): N={n} C={c} H=W={size}, "
            f"{per_image} boxes per image, {out}x{out}; with box_counts and "
            f"ragged, every other image holds {per_image * 3 // 4}, compared "
            "with the rows of those boxes; every result equal to the rows' bit "
            "for bit"
        )
    print()


def _print_tables(rows):
    for op in _OP_CASES:
        op_rows = [row for row in rows if row["op"] == op]
        if op_rows:
            _print_op_table(op, op_rows)
    dtype_rows = [row for row in rows if row["op"] == "roi_align dtypes"]
    if dtype_rows:
        _print_dtype_table(dtype_rows)
    box_form_rows = [row for row in rows if row["op"] == _BOX_FORMS]
    if box_form_rows:
        _print_box_form_table(box_form_rows)
    print(
        "times in ms (median); ratios: other time / tfco NHWC time (>1: tfco "
        "faster); NCHW/NHWC and jit/tfco are the cost of that layout or of XLA's "
        "lowering; f16/f32 and bf16/f32 are that dtype's time over float32's; "
        "a box form's ratio is its time over the rows' (>1: the form is slower)"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny case, smoke run")
    parser.add_argument("--threads", default="1,2", help="comma-separated counts")
    choices = [*_OP_CASES, _BOX_FORMS]
    parser.add_argument(
        "--ops",
        default=",".join(choices),
        help=f"comma-separated ops to time; {_BOX_FORMS}: roi_align's box forms",
    )
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ops = args.ops.split(",")
    unknown = sorted(set(ops) - set(choices))
    if unknown:
        parser.error(f"unknown ops {unknown}; choose from {sorted(choices)}")
    box_form_cases = {}
    if _BOX_FORMS in ops:
        ops.remove(_BOX_FORMS)
        box_form_cases = _QUICK_BOX_FORM_CASES if args.quick else _BOX_FORM_CASES
    if args.quick:
        cases = _QUICK_CASES
        op_cases = {op: ("quick",) for op in ops}
    else:
        cases = _CASES
        op_cases = {op: _OP_CASES[op] for op in ops}
    if args.worker:
        _run_worker(args.worker, cases, op_cases, box_form_cases)
        return
    worker_args = ["--ops", args.ops] + (["--quick"] if args.quick else [])
    threads = [int(t) for t in args.threads.split(",")]
    rows = benchmark_util.worker_rows(__file__, threads, worker_args)
    _print_tables(rows)


if __name__ == "__main__":
    main()
