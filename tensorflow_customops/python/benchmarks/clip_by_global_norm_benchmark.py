"""tfco.clip_by_global_norm against tf.clip_by_global_norm, eager and inside
tf.function, with 200 tensors of mixed sizes on CPU.

    bazel run //tensorflow_customops/python/benchmarks:clip_by_global_norm_benchmark

Target: at least 2x faster than the tf.function composite.
"""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util


def _tensors():
    # Sizes spread log-uniformly from 16 to 128K elements, like the biases,
    # norms and kernels of a mid-sized model.
    rng = np.random.default_rng(0)
    sizes = 2 ** rng.integers(4, 18, size=200)
    return [tf.constant(rng.normal(size=s), tf.float32) for s in sizes]


def main():
    print(benchmark_util.describe_machine())
    t_list = _tensors()
    total = sum(int(tf.size(t)) for t in t_list)
    print(f"200 float32 tensors, {total} elements in all; clip_norm 1.0 (clips)")

    tf_function = tf.function(lambda ts: tf.clip_by_global_norm(ts, 1.0))
    ours_function = tf.function(lambda ts: tfco.clip_by_global_norm(ts, 1.0))
    benchmark_util.compare(
        "eager",
        "tf.clip_by_global_norm",
        lambda: tf.clip_by_global_norm(t_list, 1.0),
        [("tfco.clip_by_global_norm", lambda: tfco.clip_by_global_norm(t_list, 1.0))],
    )
    benchmark_util.compare(
        "tf.function",
        "tf.clip_by_global_norm",
        lambda: tf_function(t_list),
        [("tfco.clip_by_global_norm", lambda: ours_function(t_list))],
    )


if __name__ == "__main__":
    main()
