"""Side-by-side timing for the benchmarks: each candidate is warmed up, then
timed over repeated calls, and the median is reported with its ratio to the
baseline."""

import os
import time

import numpy as np
import tensorflow as tf


def describe_machine():
    """The thread counts the timings were taken with."""
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    return (
        f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores, "
        f"intra-op threads {intra or 'default (all cores)'}, "
        f"inter-op threads {inter or 'default'}"
    )


def median_seconds(fn, warmup=3, min_repeats=5, min_seconds=1.0):
    """Median wall time of fn() over at least min_repeats calls and min_seconds.

    fn must return once its work is done: on CPU, eager ops and tf.function
    calls are synchronous, and results are fetched with .numpy() where needed.
    """
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_repeats or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def compare(title, baseline_name, baseline, candidates):
    """Times baseline and each (name, fn) candidate; prints speed ratios
    (baseline time / candidate time: above 1 means the candidate is faster)."""
    base = median_seconds(baseline)
    print(f"{title}: {baseline_name} {base * 1e3:.3f} ms")
    ratios = {}
    for name, fn in candidates:
        seconds = median_seconds(fn)
        ratios[name] = base / seconds
        print(f"    {name} {seconds * 1e3:.3f} ms, speed {ratios[name]:.2f}x")
    return ratios
