"""The bridged C++ gradient (`tfco.cpp_gradient`) against the op's Python
gradient: one forward and backward step in eager mode and in a `tf.function`,
on inputs small enough that the per-call overhead dominates.

    bazel run //tensorflow_customops/python/benchmarks:cpp_gradient_benchmark

The bridge builds the op's NodeDef, looks up the cached instantiated gradient
and calls it as a `tf.function`: that is its cost per gradient call in eager
mode. In a `tf.function` it is paid once, at tracing.
"""

import contextlib

import tensorflow as tf
from tensorflow.python.framework import ops as framework_ops

import tensorflow_customops as tfco
from tensorflow_customops.python.benchmarks import benchmark_util


@contextlib.contextmanager
def _bridged(op_type):
    registry = framework_ops._gradient_registry._registry  # pylint: disable=protected-access
    saved = registry.pop(op_type)
    tf.RegisterGradient(op_type)(tfco.cpp_gradient)
    try:
        yield
    finally:
        registry[op_type] = saved


def _step(forward, inputs):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        loss = tf.reduce_sum(forward(*inputs))
    return tape.gradient(loss, inputs)


def main():
    print(benchmark_util.describe_machine())
    features = tf.random.stateless_normal([2, 8, 8, 4], [1, 2])
    rois = tf.constant([[0, 1.0, 1.0, 6.0, 6.0], [1, 0.0, 2.0, 7.0, 5.0]])
    cases = [
        (
            "CustomOps>RoiAlign",
            lambda x: tfco.roi_align(x, rois, 2, sampling_ratio=2),
            [features],
        ),
        (
            "CustomOps>MatrixMul",
            tfco.matrix_mul,
            [tf.ones([4, 4]), tf.ones([4, 4])],
        ),
    ]
    for op_type, forward, inputs in cases:
        for mode, wrap in (("eager", lambda f: f), ("tf.function", tf.function)):
            python_step = wrap(lambda f=forward, i=inputs: _step(f, i))
            bridged = wrap(lambda f=forward, i=inputs: _step(f, i))

            def bridged_step(bridged=bridged, op_type=op_type):
                # Eager mode reads the registry at each call; a tf.function,
                # when it is traced (the first call).
                with _bridged(op_type):
                    return bridged()

            benchmark_util.compare(
                f"{op_type}, forward and backward, {mode}",
                "Python gradient",
                python_step,
                [("C++ gradient through tfco.cpp_gradient", bridged_step)],
            )


if __name__ == "__main__":
    main()
