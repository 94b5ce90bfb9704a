"""Side-by-side timing for the benchmarks: the candidates and the baseline are
warmed up, then called in turn, and each one's median time is reported with
its ratio to the baseline."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf


def worker_rows(script, thread_counts, args):
    """Runs `script --worker T *args` once per thread count T, each in a
    process of its own (TensorFlow fixes its thread pools when the first op
    runs), and returns the rows each printed as JSON on its last line; exits
    with a worker's stderr where one fails."""
    rows = []
    for threads in thread_counts:
        worker = subprocess.run(
            [sys.executable, script, "--worker", str(threads), *args],
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
    return rows


def describe_machine():
    """The thread counts the timings were taken with."""
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    return (
        f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores, "
        f"intra-op threads {intra or 'default (all cores)'}, "
        f"inter-op threads {inter or 'default'}"
    )


def median_seconds(fns, warmup=3, min_repeats=5, min_seconds=2.0):
    """Median wall time of each function in fns, called in turn.

    The calls alternate (each function once per round, for at least
    min_repeats rounds and min_seconds), so that a slow spell of a shared
    machine falls on all of them alike instead of on whichever was being timed
    then. Each fn must return once its work is done: on CPU, eager ops and
    tf.function calls are synchronous, and results are fetched with .numpy()
    where needed.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    start = time.perf_counter()
    while len(times[0]) < min_repeats or time.perf_counter() - start < min_seconds:
        for fn, fn_times in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            fn_times.append(time.perf_counter() - t0)
    return [float(np.median(fn_times)) for fn_times in times]


def median_ms(fns, rounds):
    """Median ms of each function in fns over exactly `rounds` alternating
    rounds, after two warm-up calls each."""
    times = median_seconds(fns, warmup=2, min_repeats=rounds, min_seconds=0)
    return [1000 * seconds for seconds in times]


def compare(title, baseline_name, baseline, candidates):
    """Times baseline and each (name, fn) candidate, alternating calls; prints
    speed ratios (baseline time / candidate time: above 1 means the candidate
    is faster) and returns them by name."""
    base, *others = median_seconds([baseline] + [fn for _, fn in candidates])
    print(f"{title}: {baseline_name} {base * 1e3:.3f} ms")
    ratios = {}
    for (name, _), seconds in zip(candidates, others):
        ratios[name] = base / seconds
        print(f"    {name} {seconds * 1e3:.3f} ms, speed {ratios[name]:.2f}x")
    return ratios
