"""tfco.matrix_mul against tf.matmul: float32 square matrices on CPU.

    bazel run //tensorflow_customops/python/benchmarks:matrix_mul_benchmark

Each size is compared several times, alternating, and the median speed is
reported, because build machines are shared and single timings swing.
Target: at least 0.9x tf.matmul's speed.
"""

import argparse

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(benchmark_util.describe_machine())
    medians = {}
    for n in (256, 1024, 2048):
        a = tf.random.stateless_normal([n, n], [1, 2])
        b = tf.random.stateless_normal([n, n], [3, 4])
        speeds = [
            benchmark_util.compare(
                f"float32 {n}x{n}, run {run + 1}",
                "tf.matmul",
                lambda a=a, b=b: tf.matmul(a, b),
                [("tfco.matrix_mul", lambda a=a, b=b: tfco.matrix_mul(a, b))],
            )["tfco.matrix_mul"]
            for run in range(args.repeats)
        ]
        medians[n] = float(np.median(speeds))
    print("median speed of tfco.matrix_mul over tf.matmul (above 1: tfco faster):")
    for n, speed in medians.items():
        print(f"    float32 {n}x{n}: {speed:.2f}x")


if __name__ == "__main__":
    main()
