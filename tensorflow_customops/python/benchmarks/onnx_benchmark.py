"""CPU benchmark of the ONNX export: each op's exported model in ONNX Runtime
against the library's kernels in TensorFlow, and the two-stage detector
example's model, at 1 and 2 intra-op threads.

    bazel run //tensorflow_customops/python/benchmarks:onnx_benchmark [-- --quick]

Each thread count runs in its own Python process, because TensorFlow fixes its
thread pools when the first op runs; inter-op threads are 1 in both runtimes.
TensorFlow runs the tf.function that was exported (features NHWC, the ops'
default layout, unless the case says NCHW), ONNX Runtime the exported model,
on the same inputs; calls alternate, one each per round, and each one's
median is reported with ONNX Runtime's time over TensorFlow's (below 1: ONNX
Runtime is faster) and the largest difference between their outputs.
"""

import argparse
import json

import numpy as np

from tensorflow_customops.python.benchmarks import benchmark_util

_SPATIAL_SCALE = 1.0 / 16


def _rois(rng, n, size, k):
    """[K, 5] boxes with corners uniform over a map of `size` pixels."""
    corners = np.sort(rng.uniform(0, size / _SPATIAL_SCALE, (k, 2, 2)), axis=1)
    return np.concatenate(
        [rng.integers(0, n, (k, 1)), corners[:, 0, :], corners[:, 1, :]], 1
    ).astype(np.float32)


def _roi_case(op, channels, quick, data_format="NHWC", **attrs):
    """A RoI op on [N, H, W, C] (or NCHW) features and K boxes, 7 x 7 bins."""

    def make(tf, tfco, rng):
        n, size, k = (1, 16, 16) if quick else (2, 64, 512)
        shape = [size, size, channels]
        if data_format == "NCHW":
            shape = [channels, size, size]
        features = rng.normal(size=(n, *shape)).astype(np.float32)
        rois = _rois(rng, n, size, k)

        def fn(x, r):
            out = getattr(tfco, op)(
                x,
                r,
                7,
                spatial_scale=_SPATIAL_SCALE,
                data_format=data_format,
                **attrs,
            )
            return out[0] if isinstance(out, tuple) else out

        signature = [
            tf.TensorSpec([None, *shape], tf.float32),
            tf.TensorSpec([None, 5], tf.float32),
        ]
        return fn, signature, [features, rois], f"N={n} {size}x{size}x{channels} K={k}"

    return make


def _deform_conv_case(quick):
    def make(tf, tfco, rng):
        n, size, channels = (1, 8, 8) if quick else (2, 64, 64)
        x = rng.normal(size=(n, size, size, channels)).astype(np.float32)
        offset = rng.normal(size=(n, size, size, 18)).astype(np.float32)
        mask = rng.uniform(size=(n, size, size, 9)).astype(np.float32)
        kernel = rng.normal(size=(3, 3, channels, channels)).astype(np.float32)

        def fn(x, offset, mask):
            return tfco.deform_conv2d(
                x, offset, tf.constant(kernel), padding="SAME", mask=mask
            )

        signature = [
            tf.TensorSpec([None, size, size, channels], tf.float32),
            tf.TensorSpec([None, size, size, 18], tf.float32),
            tf.TensorSpec([None, size, size, 9], tf.float32),
        ]
        shape = f"N={n} {size}x{size}x{channels} 3x3 with mask"
        return fn, signature, [x, offset, mask], shape

    return make


def _matrix_mul_case(quick):
    def make(tf, tfco, rng):
        m = 64 if quick else 1024
        a = rng.normal(size=(m, m)).astype(np.float32)
        b = rng.normal(size=(m, m)).astype(np.float32)

        def fn(a, b):
            return tfco.matrix_mul(a, b, transpose_b=True)

        signature = [tf.TensorSpec([None, m], tf.float32)] * 2
        return fn, signature, [a, b], f"{m}x{m} @ ({m}x{m})^T"

    return make


def _detector_case(quick):
    """The two-stage detector example's Keras model (untrained weights)."""

    def make(tf, tfco, rng):
        del tfco
        from examples import two_stage_detector as example

        model = example.build_model()
        batch = 2 if quick else 16
        x = example.synthetic_data(batch, seed=0)[0]
        inputs = [x["images"], x["proposals"], x["proposal_counts"]]
        signature = [
            tf.TensorSpec([None, *np.shape(x)[1:]], tf.as_dtype(np.asarray(x).dtype))
            for x in inputs
        ]

        def fn(*xs):
            out = model(list(xs), training=False)
            return [out["class_logits"], out["box_deltas"]]

        return fn, signature, inputs, f"batch {batch}"

    return make


def _cases(quick):
    ps = 8 * 49  # 8 output channels a bin, 7 x 7 bins
    return {
        "RoiAlign": _roi_case(
            "roi_align", 256 if not quick else 16, quick, sampling_ratio=2, aligned=True
        ),
        "RoiPool": _roi_case("roi_pool", 256 if not quick else 16, quick),
        "PsRoiAlign": _roi_case("ps_roi_align", ps, quick),
        "PsRoiAlign sr=2": _roi_case("ps_roi_align", ps, quick, sampling_ratio=2),
        "PsRoiPool": _roi_case("ps_roi_pool", ps, quick),
        "PsRoiAlign NCHW": _roi_case("ps_roi_align", ps, quick, "NCHW"),
        "PsRoiPool NCHW": _roi_case("ps_roi_pool", ps, quick, "NCHW"),
        "DeformableConv2d": _deform_conv_case(quick),
        "MatrixMul": _matrix_mul_case(quick),
        "two-stage detector": _detector_case(quick),
    }


def _run_worker(threads, names, quick, rounds):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import onnxruntime as ort

    import tensorflow_customops as tfco
    from tensorflow_customops.python.onnx import export

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # ONNX Runtime's idle threads spin by default, and on a machine with no
    # core to spare they would take the next TensorFlow call's.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    rows = []
    for name, make in _cases(quick).items():
        if name not in names:
            continue
        row = {"case": name, "threads": threads}
        rows.append(row)
        fn, signature, inputs, row["shape"] = make(tf, tfco, np.random.default_rng(0))
        function = tf.function(fn, input_signature=signature)
        model = export.export(function, signature)
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        feeds = {i.name: np.asarray(x) for i, x in zip(session.get_inputs(), inputs)}
        tensors = [tf.constant(x) for x in inputs]

        def run_tf(function=function, tensors=tensors):
            out = function(*tensors)
            return [np.asarray(o) for o in (out if isinstance(out, list) else [out])]

        def run_ort(session=session, feeds=feeds):
            return session.run(None, feeds)

        row["tf_ms"], row["ort_ms"] = benchmark_util.median_ms(
            [run_tf, run_ort], rounds
        )
        row["max_abs_diff"] = max(
            float(np.max(np.abs(a - b), initial=0)) for a, b in zip(run_tf(), run_ort())
        )
    print(json.dumps(rows))


def _print_table(rows):
    print(
        f"{'case':<20} {'threads':>7} {'TF ms':>9} {'ORT ms':>9} "
        f"{'ORT/TF':>7} {'max |diff|':>10}  shape"
    )
    for row in rows:
        print(
            f"{row['case']:<20} {row['threads']:>7} "
            f"{row['tf_ms']:9.3f} {row['ort_ms']:9.3f} "
            f"{row['ort_ms'] / row['tf_ms']:6.2f}x {row['max_abs_diff']:10.2e}  "
            f"{row['shape']}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny cases, smoke run")
    parser.add_argument("--threads", default="1,2", help="comma-separated counts")
    parser.add_argument(
        "--cases",
        default=",".join(_cases(False)),
        help="comma-separated cases to time",
    )
    parser.add_argument("--rounds", type=int, default=15, help="timed calls each")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.cases.split(",")
    unknown = sorted(set(names) - set(_cases(False)))
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {list(_cases(False))}")
    rounds = 3 if args.quick else args.rounds
    if args.worker:
        _run_worker(args.worker, names, args.quick, rounds)
        return
    worker_args = ["--cases", args.cases, "--rounds", str(rounds)]
    if args.quick:
        worker_args.append("--quick")
    threads = [int(t) for t in args.threads.split(",")]
    rows = benchmark_util.worker_rows(__file__, threads, worker_args)
    _print_table(rows)


if __name__ == "__main__":
    main()
