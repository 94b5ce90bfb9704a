"""Tests of CustomOps>CheckCondition: values of every dtype passed through,
the message raised on every path (eager, graph, unknown shapes, jit with a
custom call, jit with a condition known at compile time), the documented
pass-through of the HLO lowering, a check no graph prunes, gradients, and
argument errors. The registry entry adds the cross-op checks: determinism,
threads, large shapes, the C++ gradient (cpp_gradients_test), XLA
(xla_test), fuzzing and goldens."""

import contextlib

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import xla_test_util
from tensorflow_customops.python.ops import op_specs

_DTYPES = op_specs.allowed_dtypes("CustomOps>CheckCondition")
_MESSAGE = "x must be positive, got a value at most 0"


def _positive(x):
    """x, checked to be positive by the op."""
    return tfco.check_condition(tf.reduce_all(x > 0), [x], _MESSAGE)[0]


class CheckConditionTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.parameters([()], [(0,)], [(7,)], [(3, 0, 2)], [(4, 5, 6)])
    def test_passes_every_dtype_through(self, shape):
        rng = np.random.default_rng(0)
        values = [tf.cast(rng.integers(0, 5, size=shape), d) for d in _DTYPES]
        for condition in (True, [True, True], tf.ones([0], tf.bool)):
            checked = tfco.check_condition(condition, values, "never")
            self.assertLen(checked, len(values))
            for x, y in zip(values, checked):
                self.assertEqual(y.dtype, x.dtype)
                self.assertAllEqual(y, x)

    def test_false_condition_raises_the_message(self):
        for condition in (False, [True, False], [[True], [False]]):
            with self.subTest(condition=condition):
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, _MESSAGE):
                    tfco.check_condition(condition, [tf.ones([2])], _MESSAGE)

    def test_every_path(self):
        good, bad = tf.constant([1.0, 2.0]), tf.constant([1.0, -2.0])
        paths = [
            ("eager", _positive),
            ("graph", tf.function(_positive)),
            (
                "unknown",
                tf.function(_positive, input_signature=[tf.TensorSpec(None)]),
            ),
        ]
        if xla_test_util.custom_calls():
            paths.append(("jit", tf.function(_positive, jit_compile=True)))
        for label, fn in paths:
            with self.subTest(path=label):
                self.assertAllEqual(fn(good), good)
                with self.assertRaisesRegex(
                    xla_test_util.data_error()
                    if label == "jit"
                    else tf.errors.InvalidArgumentError,
                    _MESSAGE,
                ):
                    fn(bad)

    def test_in_a_tf1_graph(self):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None])
            (y,) = tfco.check_condition(tf.reduce_all(x > 0), [x], _MESSAGE)
            with tf.compat.v1.Session() as sess:
                self.assertAllEqual(sess.run(y, {x: [3.0]}), [3.0])
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, _MESSAGE):
                    sess.run(y, {x: [-3.0]})

    def test_not_pruned_where_nothing_reads_it(self):
        # Stateful, as Assert is: a tf.function runs it though its outputs
        # are unused.
        @tf.function
        def fn(x):
            tfco.check_condition(tf.reduce_all(x > 0), [x], _MESSAGE)
            return x + 1

        self.assertAllEqual(fn(tf.ones([2])), [2.0, 2.0])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, _MESSAGE):
            fn(-tf.ones([2]))

    def test_jit_condition_known_at_compile_time(self):
        # A condition of static shapes is checked when XLA compiles, on every
        # lowering.
        def fn(x, y):
            same = tf.reduce_all(tf.equal(tf.shape(x), tf.shape(y)))
            return tfco.check_condition(same, [x, y], "y must have x's shape")

        for hlo in (False, True):
            with self.subTest(hlo=hlo):
                with xla_test_util.hlo_lowering() if hlo else contextlib.nullcontext():
                    jit = tf.function(fn, jit_compile=True)
                    x, y = jit(tf.ones([2, 3]), tf.zeros([2, 3]))
                    self.assertAllEqual(y, tf.zeros([2, 3]))
                    ir = jit.experimental_get_compiler_ir(
                        tf.ones([2, 3]), tf.zeros([2, 3])
                    )(stage="hlo")
                    self.assertNotIn("custom_call_target", ir)
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, "y must have x's shape"
                    ):
                        jit(tf.ones([2, 3]), tf.zeros([3, 2]))

    def test_jit_known_false_condition_in_a_branch_not_taken(self):
        # XLA compiles both branches of a tf.cond: a condition it knows is
        # false fails the compilation, as a shape error there would.
        @tf.function(jit_compile=True)
        def fn(take, x):
            return tf.cond(
                take,
                lambda: x + 1,
                lambda: tfco.check_condition(False, [x], "never checked eagerly")[0],
            )

        take, x = tf.constant(True), tf.ones([2])
        self.assertAllEqual(tf.function(fn.python_function)(take, x), [2, 2])
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, "never checked eagerly"
        ):
            fn(take, x)

    def test_jit_custom_call(self):
        if not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")

        @tf.function(jit_compile=True)
        def fn(x, flags):
            a, b = tfco.check_condition(flags, [x * 2, x], "a flag is off")
            return a + 1, b

        x = tf.constant([1.0, 2.0], tf.bfloat16)
        a, b = fn(x, tf.constant([True, True, True]))
        self.assertAllEqual(a, [3.0, 5.0])
        self.assertAllEqual(b, x)
        with self.assertRaisesRegex(xla_test_util.data_error(), "a flag is off"):
            fn(x, tf.constant([True, False, True]))
        ir = fn.experimental_get_compiler_ir(x, tf.constant([True, True, True]))(
            stage="hlo"
        )
        self.assertIn('custom_call_target="tfco_check_condition"', ir)
        # A side effect keeps the call though nothing reads its result.
        self.assertIn("custom_call_has_side_effect=true", ir)

    def test_hlo_lowering_passes_the_values_through(self):
        # The GPU and TFCO_XLA_LOWERING=hlo: a compiled program cannot raise
        # on a condition known only at run time (docs/xla.md).
        with xla_test_util.hlo_lowering():
            jit = tf.function(_positive, jit_compile=True)
            bad = tf.constant([1.0, -2.0])
            self.assertAllEqual(jit(bad), bad)
            ir = jit.experimental_get_compiler_ir(bad)(stage="hlo")
            self.assertNotIn("custom_call_target", ir)

    def test_gradient_passes_through(self):
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            condition = tf.reduce_all(x > 0)
            (y,) = tfco.check_condition(condition, [x * 3], _MESSAGE)
            loss = tf.reduce_sum(y * [1.0, 5.0])
        self.assertAllEqual(tape.gradient(loss, x), [3.0, 15.0])
        theoretical, numerical = tf.test.compute_gradient(
            lambda v: _positive(v) ** 2, [tf.constant([1.0, 3.0], tf.float64)]
        )
        self.assertAllClose(theoretical, numerical)

    def test_shape_inference(self):
        fn = tf.function(
            lambda c, x, y: tfco.check_condition(c, [x, y], "m")
        ).get_concrete_function(
            tf.TensorSpec(None, tf.bool),
            tf.TensorSpec([None, 3], tf.float32),
            tf.TensorSpec(None, tf.int64),
        )
        x, y = fn.structured_outputs
        self.assertEqual(x.shape.as_list(), [None, 3])
        self.assertEqual(y.shape, tf.TensorShape(None))

    def test_argument_errors(self):
        x = tf.ones([2])
        for call, error, message in (
            (lambda: tfco.check_condition(True, x, "m"), TypeError, "wrap a single"),
            (lambda: tfco.check_condition(True, [], "m"), ValueError, "not be empty"),
            (
                lambda: tfco.check_condition(True, [x], b"m"),
                TypeError,
                "message must be a string, got bytes",
            ),
            (
                lambda: tfco.check_condition(1, [x], "m"),
                TypeError,
                "condition must be bool, got int32",
            ),
            (
                lambda: tfco.check_condition(True, [x, tf.constant(["s"])], "m"),
                TypeError,
                r"values\[1\] must be numeric or bool, got string",
            ),
            (
                lambda: tfco.check_condition(True, [x, [1, "a"]], "m"),
                TypeError,
                r"values\[1\] must be a tensor",
            ),
        ):
            with self.subTest(message=message):
                with self.assertRaisesRegex(error, message):
                    call()


if __name__ == "__main__":
    tf.test.main()
