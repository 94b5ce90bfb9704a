"""tfco.matrix_mul against tf.matmul: float32 on CPU, square matrices and
thin products (a matrix times a vector or a few, a vector or a small batch
times a matrix).

    bazel run //tensorflow_customops/python/benchmarks:matrix_mul_benchmark

Each shape is compared several times, alternating, and the median speed is
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
    for m, k, n in _SHAPES:
        a = tf.random.stateless_normal([m, k], [1, 2])
        b = tf.random.stateless_normal([k, n], [3, 4])
        name = f"{m}x{k} @ {k}x{n}"
        speeds = [
            benchmark_util.compare(
                f"float32 {name}, run {run + 1}",
                "tf.matmul",
                lambda a=a, b=b: tf.matmul(a, b),
                [("tfco.matrix_mul", lambda a=a, b=b: tfco.matrix_mul(a, b))],
            )["tfco.matrix_mul"]
            for run in range(args.repeats)
        ]
        medians[name] = float(np.median(speeds))
    print("median speed of tfco.matrix_mul over tf.matmul (above 1: tfco faster):")
    for name, speed in medians.items():
        print(f"    float32 {name}: {speed:.2f}x")


# (m, k, n): square products, then thin ones, which take other paths (see
# core/kernels/matrix_mul/matrix_mul_cpu_gemm.h).
_SHAPES = (
    (256, 256, 256),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (2048, 2048, 1),
    (2048, 2048, 8),
    (1, 2048, 2048),
    (8, 2048, 2048),
    (64, 2048, 2048),
)


if __name__ == "__main__":
    main()
