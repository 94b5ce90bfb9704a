"""tfco.clip_by_global_norm against tf.clip_by_global_norm, eager and inside
tf.function, with 200 tensors of mixed sizes on CPU.

    bazel run //tensorflow_customops/python/benchmarks:clip_by_global_norm_benchmark

Target: at least 2x faster than the tf.function composite. Two mixes: sizes up
to 128K elements, where both sides are bound by memory traffic (each reads the
tensors twice and writes them once), and sizes up to 4K elements, where the
composite's per-op cost dominates.

Calling a tf.function with 200 tensor arguments costs milliseconds by itself,
the same for both sides, so the clip is also timed as it runs inside a
training step: the cost of one more clip in a graph, from tf.functions that
chain 1 and 21 clips, (time of 21 - time of 1) / 20.

The same is timed for all the elements as one tensor, where the composite is
a handful of ops. On the large mix that costs about the memory traffic alone,
which a fused op cannot avoid (it too reads every tensor twice and writes it
once), so the composite's time on 200 tensors over its time on one tensor
("200 / 1") estimates the best speed any fused op can reach there. On the
small mix the one-tensor time is mostly per-op cost, so the ratio bounds
nothing.
"""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util


def _tensors(max_log2_size):
    # Sizes spread log-uniformly from 16 to 2**max_log2_size elements, like the
    # biases, norms and kernels of a model.
    rng = np.random.default_rng(0)
    sizes = 2 ** rng.integers(4, max_log2_size + 1, size=200)
    return [tf.constant(rng.normal(size=s), tf.float32) for s in sizes]


def main():
    print(benchmark_util.describe_machine())
    for max_log2_size in (17, 12):
        _compare(_tensors(max_log2_size))


def _compare(t_list):
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
        "tf.function, one clip per call",
        "tf.clip_by_global_norm",
        lambda: tf_function(t_list),
        [("tfco.clip_by_global_norm", lambda: ours_function(t_list))],
    )
    tf_clip, ours_clip = _clip_in_graph(t_list)
    tf_one, ours_one = _clip_in_graph([tf.concat(t_list, 0)])
    print(
        f"one more clip inside a tf.function: tf.clip_by_global_norm "
        f"{tf_clip * 1e3:.3f} ms, on the elements as one tensor "
        f"{tf_one * 1e3:.3f} ms"
    )
    print(
        f"    tfco.clip_by_global_norm {ours_clip * 1e3:.3f} ms "
        f"(one tensor: {ours_one * 1e3:.3f} ms), speed {tf_clip / ours_clip:.2f}x; "
        f"tf.clip_by_global_norm 200 / 1: {tf_clip / tf_one:.2f}x"
    )


def _clip_in_graph(t_list):
    """Seconds one more clip adds inside a tf.function: TensorFlow's, ours."""
    long_chain = 21
    chains = [
        _chained(clip, count)
        for clip in (tf.clip_by_global_norm, tfco.clip_by_global_norm)
        for count in (1, long_chain)
    ]
    tf_1, tf_long, ours_1, ours_long = benchmark_util.median_seconds(
        [lambda f=f: f(t_list) for f in chains]
    )
    return (tf_long - tf_1) / (long_chain - 1), (ours_long - ours_1) / (long_chain - 1)


def _chained(clip, count):
    @tf.function
    def clip_repeatedly(t_list):
        for _ in range(count):
            t_list, _ = clip(t_list, 1.0)
        return t_list

    return clip_repeatedly


if __name__ == "__main__":
    main()
