"""C++ gradients in TF2 through `tfco.cpp_gradient`, for every op of the
library that has one (read from its OpList): bit for bit the Python gradient
in eager mode and in `tf.function`, for every dtype and attr case; both equal
the numeric Jacobian in float64; second-order gradients through both (or the
error an op without them raises); and an
op whose Python gradient is removed gets the bridged one at registration."""

import contextlib
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import ops as framework_ops

from tensorflow_customops.python import registry as op_registry
from tensorflow_customops.python.ops import cpp_gradients, load_library
from tensorflow_customops.python.registry import values

_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _ops_with_cpp_gradients():
    return sorted(
        op.name
        for op in load_library.op_list().op
        if cpp_gradients.has_cpp_gradient(op.name)
    )


def _all_cases():
    """The registry's gradient cases: small inputs; each forward casts its
    floating inputs to the dtype under test, except those it does not
    differentiate (boxes, say), which are always float32."""
    return [
        dict(testcase_name=f"{op.split('>')[1]}_{case.name}", op=op, case=case)
        for op, entry in sorted(op_registry.entries().items())
        for case in entry.gradient_cases()
    ]


@contextlib.contextmanager
def _bridged(op_type):
    """`op_type`'s Python gradient replaced by the bridged C++ gradient, the
    way `register_missing_gradients` registers it for an op without one."""
    registry = framework_ops._gradient_registry._registry  # pylint: disable=protected-access
    saved = registry.pop(op_type)
    try:
        yield cpp_gradients.register_missing_gradients()
    finally:
        registry[op_type] = saved


def _upstream(outputs):
    return [
        tf.constant(values.normal(11 + k, *y.shape), tf.float64)
        for k, y in enumerate(outputs)
    ]


def _gradients(case, tensors, indices, upstream=None):
    """d(sum(forward * upstream)) / d(differentiable inputs); a fixed random
    upstream by default."""
    forward = case.forward
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        outputs = tf.nest.flatten(forward(*tensors))
        upstream = _upstream(outputs) if upstream is None else upstream
        loss = tf.add_n(
            [
                tf.reduce_sum(tf.cast(y, tf.float64) * u)
                for y, u in zip(outputs, upstream)
            ]
        )
    return tape.gradient(loss, [tensors[i] for i in indices])


class CppGradientsTest(tf.test.TestCase, parameterized.TestCase):
    def test_every_op_with_a_cpp_gradient_has_cases(self):
        ops = _ops_with_cpp_gradients()
        self.assertNotEmpty(ops)
        entries = op_registry.entries()
        missing = [op for op in ops if not entries[op].gradient_cases()]
        self.assertEmpty(
            missing,
            f"give {missing} gradient_cases in their entries in "
            "tensorflow_customops/python/registry/: inputs, a forward function "
            "and its differentiable inputs",
        )
        extra = [
            op for op, e in entries.items() if e.gradient_cases() and op not in ops
        ]
        self.assertEmpty(extra, "gradient_cases for ops without a C++ gradient")

    @parameterized.named_parameters(_all_cases())
    def test_bridged_equals_python_bit_for_bit(self, op, case):
        for dtype in _DTYPES:
            tensors, indices = case.tensors(dtype)
            python = _gradients(case, tensors, indices)
            python_graph = tf.function(
                lambda *t, i=indices: _gradients(case, list(t), i)
            )(*tensors)
            with _bridged(op) as registered:
                self.assertEqual(registered, [op])
                bridged = _gradients(case, tensors, indices)
                bridged_graph = tf.function(
                    lambda *t, i=indices: _gradients(case, list(t), i)
                )(*tensors)
            for got, want in zip(bridged + bridged_graph, python + python_graph):
                self.assertEqual(got.dtype, dtype)
                self.assertAllEqual(got, want)
            self.assertTrue(any(np.any(g != 0) for g in python))

    @parameterized.named_parameters(_all_cases())
    def test_numeric_jacobians_first_and_second_order(self, op, case):
        tensors, indices = case.tensors(tf.float64)
        count = len(indices)

        def with_points(points):
            inputs = list(tensors)
            for i, t in zip(indices, points):
                inputs[i] = t
            return inputs

        def forward(*points):
            return tf.nest.flatten(case.forward(*with_points(points)))

        def first_order(*points_and_upstream):
            points, upstream = points_and_upstream[:count], points_and_upstream[count:]
            return _gradients(case, with_points(points), indices, list(upstream))

        points = [tensors[i] for i in indices]
        upstream = _upstream(forward(*points))
        for bridged in (False, True):
            with _bridged(op) if bridged else contextlib.nullcontext():
                for k in range(len(upstream)):
                    with self.subTest(bridged=bridged, order=1, output=k):
                        theoretical, numerical = tf.test.compute_gradient(
                            lambda *p, k=k: forward(*p)[k], points, delta=1e-6
                        )
                        self.assertAllClose(
                            theoretical, numerical, rtol=1e-6, atol=1e-6
                        )
                # The first-order gradients as functions of the inputs and
                # of the upstream gradient.
                second_order_error = op_registry.entries()[op].second_order_error
                if second_order_error:
                    with self.subTest(bridged=bridged, order=2):
                        with self.assertRaisesRegex(
                            tf.errors.InvalidArgumentError, second_order_error
                        ):
                            tf.test.compute_gradient(
                                lambda *p: first_order(*p)[0],
                                points + upstream,
                                delta=1e-6,
                            )
                    continue
                for k in range(count):
                    with self.subTest(bridged=bridged, order=2, gradient=k):
                        theoretical, numerical = tf.test.compute_gradient(
                            lambda *p, k=k: first_order(*p)[k],
                            points + upstream,
                            delta=1e-6,
                        )
                        self.assertAllClose(
                            theoretical, numerical, rtol=1e-5, atol=1e-5
                        )

    def test_ops_without_cpp_gradients(self):
        # Each library op without one that a registry case runs, and a
        # TensorFlow op without one, whichever ops the library has.
        runs = [(tf.math.cumsum, [np.ones(3, np.float32)])]
        expected = {"Cumsum"}
        for op, entry in op_registry.entries().items():
            if not cpp_gradients.has_cpp_gradient(op):
                for case in entry.property_cases()[:1]:
                    tensors, _ = case.tensors(tf.float32)
                    runs.append((case.forward, [x.numpy() for x in tensors]))
                    expected.add(op)
        graph = tf.Graph()
        with graph.as_default():
            for forward, arrays in runs:
                forward(*[tf.constant(a) for a in arrays])
            checked = set()
            for node in graph.get_operations():
                if node.type not in expected or node.type in checked:
                    continue
                checked.add(node.type)
                self.assertFalse(cpp_gradients.has_cpp_gradient(node.type))
                grads = [tf.ones_like(y) for y in node.outputs]
                if not any(x.dtype.is_floating for x in node.inputs):
                    self.assertEqual(
                        cpp_gradients.cpp_gradient(node, *grads),
                        [None] * len(node.inputs),
                    )
                    continue
                with self.assertRaisesRegex(
                    LookupError, f"No C\\+\\+ gradient for {re.escape(node.type)}"
                ):
                    cpp_gradients.cpp_gradient(node, *grads)
        self.assertEqual(checked, expected)
        self.assertFalse(cpp_gradients.has_cpp_gradient("NoSuchOp"))

    def test_ops_with_python_gradients_are_left_alone(self):
        self.assertEqual(cpp_gradients.register_missing_gradients(), [])


if __name__ == "__main__":
    tf.test.main()
