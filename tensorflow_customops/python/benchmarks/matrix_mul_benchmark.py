"""tfco.matrix_mul against tf.matmul: float32 square matrices on CPU.

    bazel run //tensorflow_customops/python/benchmarks:matrix_mul_benchmark

Target: at least 0.9x tf.matmul's speed.
"""

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util


def main():
    print(benchmark_util.describe_machine())
    for n in (256, 1024, 2048):
        a = tf.random.stateless_normal([n, n], [1, 2])
        b = tf.random.stateless_normal([n, n], [3, 4])
        benchmark_util.compare(
            f"float32 {n}x{n}",
            "tf.matmul",
            lambda a=a, b=b: tf.matmul(a, b),
            [("tfco.matrix_mul", lambda a=a, b=b: tfco.matrix_mul(a, b))],
        )


if __name__ == "__main__":
    main()
