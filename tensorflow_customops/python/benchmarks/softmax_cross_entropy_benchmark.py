"""The gradient of tfco.gradients.softmax_cross_entropy (probs - labels)
against autodiff of the composed form -sum(labels * log_softmax(logits)),
inside tf.function on CPU.

    bazel run //tensorflow_customops/python/benchmarks:softmax_cross_entropy_benchmark
"""

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util


def _composed(logits, labels):
    return -tf.reduce_sum(labels * tf.nn.log_softmax(logits), axis=-1)


def _loss_and_grad(loss_fn):
    @tf.function
    def run(logits, labels):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.reduce_sum(loss_fn(logits, labels))
        return loss, tape.gradient(loss, logits)

    return run


def main():
    print(benchmark_util.describe_machine())
    for batch, classes in [(256, 1000), (4096, 1000), (512, 32000)]:
        logits = tf.random.stateless_normal([batch, classes], [1, 2])
        labels = tf.nn.softmax(tf.random.stateless_normal([batch, classes], [3, 4]))
        composed = _loss_and_grad(_composed)
        ours = _loss_and_grad(tfco.gradients.softmax_cross_entropy)
        benchmark_util.compare(
            f"loss + gradient, float32 [{batch}, {classes}]",
            "autodiff of the composed form",
            lambda c=composed, z=logits, y=labels: c(z, y),
            [
                (
                    "tfco.gradients.softmax_cross_entropy",
                    lambda o=ours, z=logits, y=labels: o(z, y),
                )
            ],
        )


if __name__ == "__main__":
    main()
