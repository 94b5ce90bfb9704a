"""XLA for every op of the library (read from its OpList): each has a lowering,
and the registry's gradient cases, forward and gradient, compile under
jit_compile=True and match eager on CPU for every dtype and layout, bit for
bit or within the tolerance its registry entry states; ops lowered to custom
calls into their kernels do so (bit for bit), and their HLO lowerings are
checked too; with unknown input shapes too, and with dynamic ones (refused
with an error naming the input where a lowering cannot take them); an op
that cannot be lowered by
design fails at compile time with its reason; and the lowerings load in
either order with a jit compilation."""

import functools
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import kernels

import tensorflow_customops as tfco
from tensorflow_customops.python import registry as op_registry
from tensorflow_customops.python.kernel_tests import xla_test_util
from tensorflow_customops.python.ops import load_library

_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _has_xla_kernel(op):
    return any(
        k.device_type == "XLA_CPU_JIT"
        for k in kernels.get_registered_kernels_for_op(op).kernel
    )


def _cases(supported, custom_call_only=False):
    """Gradient cases of the ops that compile (supported) or fail to compile
    with their HLO lowering; an op with a custom call is in both lists, and
    the tests skip what this build cannot do (_skip_unless_compiled)."""
    return [
        dict(testcase_name=f"{op.split('>')[1]}_{case.name}", op=op, case=case)
        for op, entry in sorted(op_registry.entries().items())
        if (
            entry.xla_custom_call
            if custom_call_only
            else (not entry.xla_unsupported or entry.xla_custom_call)
            if supported
            else entry.xla_unsupported
        )
        for case in entry.gradient_cases()
    ]


def _each(cases):
    """named_parameters over `cases`, or, where the registry has no case of
    the kind (absl refuses an empty list), one test that skips and says so."""
    if cases:
        return parameterized.named_parameters(*cases)

    def skipped(test):
        @functools.wraps(test)
        def skip(self):
            self.skipTest("no op in the registry has a case of this kind")

        return skip

    return skipped


def _tolerance(op):
    """The entry's tolerance, unless the op compiles to custom calls into
    its kernels, which must give their bits."""
    entry = op_registry.entries()[op]
    if entry.xla_custom_call and xla_test_util.custom_calls():
        return {}
    return entry.xla_tolerance


def _float_outputs(outputs):
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [y for y in outputs if y.dtype.is_floating]


def _forward_and_gradient(case, weights):
    """(outputs, gradients) of sum(output * weight): the gradient of that loss
    with respect to each output is its weight exactly, under XLA too, so the
    gradients compared are the op's own."""

    def run(*tensors):
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            outputs = _float_outputs(case.forward(*tensors))
            # In float64, as an op's outputs may differ in dtype.
            loss = tf.add_n(
                [
                    tf.cast(tf.reduce_sum(y * tf.cast(w, y.dtype)), tf.float64)
                    for y, w in zip(outputs, weights)
                ]
            )
        return outputs, tape.gradient(loss, list(tensors))

    return run


def _weights(case, dtype):
    tensors, _ = case.tensors(dtype)
    rng = np.random.default_rng(7)
    return [
        rng.standard_normal(y.shape) for y in _float_outputs(case.forward(*tensors))
    ]


def _first_compiled_cases():
    """(op, gradient case): the first of an op lowered to custom calls and
    the first of one lowered to HLO, of those this build compiles."""
    picked = {}
    for params in _cases(supported=True):
        entry = op_registry.entries()[params["op"]]
        if entry.xla_unsupported and not xla_test_util.custom_calls():
            continue
        picked.setdefault(entry.xla_custom_call, (params["op"], params["case"]))
    return list(picked.values())


class XlaTest(parameterized.TestCase, tf.test.TestCase):
    def _skip_unless_compiled(self, op):
        if op_registry.entries()[op].xla_unsupported and not (
            xla_test_util.custom_calls()
        ):
            self.skipTest("compiles to a custom call only, which this build lacks")

    def setUp(self):
        super().setUp()
        available, reason = load_library.xla_status()
        if not tfco.build_info()["xla"] and "noxla" in reason:
            self.skipTest(reason)
        self.assertTrue(available, reason)

    def test_every_op_has_a_lowering(self):
        # XLA registers its kernels at the first compilation.
        tf.function(lambda x: x + 1, jit_compile=True)(tf.ones([1]))
        missing = [
            op.name for op in load_library.op_list().op if not _has_xla_kernel(op.name)
        ]
        self.assertEqual(
            missing,
            [],
            "ops without an XLA lowering: add one in "
            "tensorflow_customops/compiler/tf2xla/kernels/<family>/ "
            "(see CONTRIBUTING.md)",
        )

    def test_every_op_is_compiled_by_a_case(self):
        compiled = set()
        for params in _cases(supported=True):
            case = params["case"]
            tensors, _ = case.tensors(tf.float32)
            weights = _weights(case, tf.float32)
            graph = (
                tf.function(_forward_and_gradient(case, weights), jit_compile=True)
                .get_concrete_function(*tensors)
                .graph
            )
            compiled.update(op.type for op in graph.get_operations())
        entries = op_registry.entries()
        missing = [
            op
            for op in op_registry.registered_ops()
            if op not in compiled and not entries[op].xla_unsupported
        ]
        self.assertEqual(
            missing,
            [],
            "ops that no registry gradient case runs under XLA: give their "
            "forward op a gradient case in tensorflow_customops/python/registry",
        )

    @_each(_cases(supported=True))
    def test_matches_eager(self, op, case):
        self._skip_unless_compiled(op)
        self._check_matches_eager(case, _tolerance(op))

    @_each(_cases(supported=True, custom_call_only=True))
    def test_hlo_lowering_matches_eager(self, op, case):
        if not xla_test_util.custom_calls():
            self.skipTest("test_matches_eager compiles the HLO lowering")
        if op_registry.entries()[op].xla_unsupported:
            self.skipTest("test_unsupported_op_fails_at_compile_time")
        with xla_test_util.hlo_lowering():
            self._check_matches_eager(case, op_registry.entries()[op].xla_tolerance)

    def test_custom_calls_are_typed_ffi_where_tensorflow_has_it(self):
        # XLA's typed FFI from TensorFlow 2.20 raises the kernels' own errors;
        # the legacy custom calls are for 2.12 to 2.19 only (docs/xla.md).
        if not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")
        release = tuple(int(part) for part in tf.__version__.split(".")[:2])
        api = "typed_ffi" if release >= (2, 20) else "legacy"
        self.assertEqual(tfco.build_info()["xla_custom_call_api"], api)
        cases = _cases(supported=True, custom_call_only=True)
        if not cases:
            self.skipTest("no op lowers to a custom call")
        case = cases[0]["case"]
        tensors, _ = case.tensors(tf.float32)
        hlo = tf.function(case.forward, jit_compile=True).experimental_get_compiler_ir(
            *tensors
        )(stage="hlo")
        version = {
            "typed_ffi": "API_VERSION_TYPED_FFI",
            "legacy": "API_VERSION_STATUS_RETURNING_UNIFIED",
        }[api]
        self.assertRegex(hlo, rf'custom_call_target="tfco_\w+".*api_version={version}')

    def test_host_handlers_are_the_lowerings_targets(self):
        # build_info() lists the handlers the library registered with XLA
        # (custom_call.cc records them): each must be a target that some op's
        # forward or gradient lowers to, and each such target registered.
        handlers = tfco.build_info()["xla_ffi_handlers"].get("Host")
        if not handlers:
            self.skipTest("this build registers no typed-FFI handlers")
        targets = set()
        for entry in _cases(supported=True, custom_call_only=True):
            case = entry["case"]
            tensors, _ = case.tensors(tf.float32)
            run = _forward_and_gradient(case, _weights(case, tf.float32))
            hlo = tf.function(run, jit_compile=True).experimental_get_compiler_ir(
                *tensors
            )(stage="hlo")
            targets.update(re.findall(r'custom_call_target="(\w+)"', hlo))
        self.assertEqual(sorted(targets), handlers)

    @_each(_cases(supported=True, custom_call_only=True))
    def test_lowering_is_a_custom_call_unless_hlo_is_asked_for(self, op, case):
        if not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")
        tensors, _ = case.tensors(tf.float32)
        run = _forward_and_gradient(case, _weights(case, tf.float32))

        def hlo():
            return tf.function(run, jit_compile=True).experimental_get_compiler_ir(
                *tensors
            )(stage="hlo")

        self.assertIn('custom_call_target="tfco_', hlo())
        if not op_registry.entries()[op].xla_unsupported:
            with xla_test_util.hlo_lowering():
                self.assertNotIn("custom_call_target", hlo())

    def _check_matches_eager(self, case, tolerance):
        for dtype in _DTYPES:
            with self.subTest(dtype=dtype.name):
                tensors, indices = case.tensors(dtype)
                weights = _weights(case, dtype)
                run = _forward_and_gradient(case, weights)
                eager = run(*tensors)
                jit = tf.function(run, jit_compile=True)(*tensors)
                expected = eager[0] + [eager[1][i] for i in indices]
                got = jit[0] + [jit[1][i] for i in indices]
                for want, have in zip(expected, got):
                    if dtype.name in tolerance:
                        rtol, atol = tolerance[dtype.name][:2]
                        self.assertAllClose(want, have, rtol=rtol, atol=atol)
                    else:
                        self.assertAllEqual(want, have)

    def _float32_step(self, op, case):
        """(tensors, run, check) of `case` in float32: its inputs, its forward
        and gradient, and a check of another path's results against run's
        within the op's float32 tolerance."""
        self._skip_unless_compiled(op)
        tensors, _ = case.tensors(tf.float32)
        run = _forward_and_gradient(case, _weights(case, tf.float32))
        expected = tf.nest.flatten(run(*tensors))
        rtol, atol = _tolerance(op).get("float32", (0, 0))[:2]

        def check(got):
            for want, have in zip(expected, tf.nest.flatten(got)):
                if have is not None:
                    self.assertAllClose(want, have, rtol=rtol, atol=atol)

        return tensors, run, check

    @_each(_cases(supported=True))
    def test_unknown_shapes(self, op, case):
        tensors, run, check = self._float32_step(op, case)
        signature = [tf.TensorSpec([None] * t.shape.rank, t.dtype) for t in tensors]
        check(tf.function(run, jit_compile=True, input_signature=signature)(*tensors))

    @_each(_cases(supported=True))
    def test_dynamic_first_dimensions(self, op, case):
        # Each input's first dimension made dynamic (under XLA, tf.boolean_mask
        # gives a size known at run time under a static bound): the result
        # is eager's, or the compilation fails naming the input; never what
        # the padded bound gives.
        tensors, run, check = self._float32_step(op, case)
        refused = re.escape(op) + r" under XLA: dimension \d+ of [\w\[\]]+ is dynamic"
        for i, tensor in enumerate(tensors):
            if tensor.shape.rank == 0 or tensor.shape[0] == 0:
                continue

            def masked(keep, *tensors, i=i):
                tensors = list(tensors)
                tensors[i] = tf.boolean_mask(tensors[i], keep)
                return run(*tensors)

            keep = tf.ones([tensor.shape[0]], tf.bool)
            with self.subTest(input=i):
                try:
                    got = tf.function(masked, jit_compile=True)(keep, *tensors)
                except tf.errors.UnimplementedError as e:
                    self.assertRegex(e.message, refused)
                    continue
                check(got)

    def test_tolerances_name_dtypes_and_reasons(self):
        for op, entry in op_registry.entries().items():
            for dtype_name, (_, _, reason) in entry.xla_tolerance.items():
                self.assertIn(dtype_name, [d.name for d in _DTYPES], op)
                self.assertTrue(reason, op)

    def test_shape_errors_at_compile_time_match_the_kernels(self):
        # With unknown shapes the shape functions accept the call, and the
        # lowering sees the shapes when XLA compiles it.
        for op, entry in sorted(op_registry.entries().items()):
            for case, message in entry.xla_shape_errors():
                with self.subTest(op=op, case=case.name):
                    args, _ = case.tensors(tf.float32)
                    signature = [tf.TensorSpec(None, a.dtype) for a in args]
                    fn = case.forward
                    jit = tf.function(fn, jit_compile=True, input_signature=signature)
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, message
                    ):
                        jit(*args)
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, message
                    ):
                        tf.function(fn, input_signature=signature)(*args)

    @_each(_cases(supported=False))
    def test_unsupported_op_fails_at_compile_time(self, op, case):
        tensors, _ = case.tensors(tf.float32)
        with xla_test_util.hlo_lowering():
            with self.assertRaisesRegex(
                (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError),
                op_registry.entries()[op].xla_unsupported,
            ):
                tf.function(case.forward, jit_compile=True)(*tensors)

    @parameterized.named_parameters(
        ("jit", "tf.function(lambda x: x * 2, jit_compile=True)(tf.ones([2]))"),
        ("eager", "tf.ones([2]) * 2"),
    )
    def test_loads_after_tensorflow_ran(self, prelude):
        # XLA makes its kernels at TensorFlow's first op execution or
        # compilation; the package imported after either must still lower its
        # ops, with the same lowering (custom call or HLO) as otherwise.
        picked = _first_compiled_cases()
        self.assertTrue(picked, "no registry gradient case compiles under XLA")
        script = textwrap.dedent(
            f"""
            import json
            import tensorflow as tf
            print({prelude})
            import tensorflow_customops as tfco
            from tensorflow_customops.python import registry
            assert tfco.build_info()["xla"], tfco.build_info()
            for op, name in {[(op, case.name) for op, case in picked]!r}:
                cases = registry.entries()[op].gradient_cases()
                case = next(c for c in cases if c.name == name)
                tensors, _ = case.tensors(tf.float32)
                jit = tf.function(case.forward, jit_compile=True)
                hlo = jit.experimental_get_compiler_ir(*tensors)(stage="hlo")
                outputs = [y.numpy().tolist() for y in tf.nest.flatten(jit(*tensors))]
                custom_call = 'custom_call_target="tfco_' in hlo
                print("RESULT", json.dumps([op, custom_call, outputs]))
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=False
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        results = [
            json.loads(line[len("RESULT ") :])
            for line in result.stdout.splitlines()
            if line.startswith("RESULT ")
        ]
        self.assertEqual([r[0] for r in results], [op for op, _ in picked])
        for (op, case), (_, custom_call, outputs) in zip(picked, results):
            with self.subTest(op=op):
                entry = op_registry.entries()[op]
                self.assertEqual(
                    custom_call, entry.xla_custom_call and xla_test_util.custom_calls()
                )
                tensors, _ = case.tensors(tf.float32)
                eager = tf.nest.flatten(case.forward(*tensors))
                rtol, atol = _tolerance(op).get("float32", (0, 0))[:2]
                self.assertEqual(len(outputs), len(eager))
                for want, have in zip(eager, outputs):
                    self.assertAllClose(
                        want,
                        np.asarray(have, want.dtype.as_numpy_dtype),
                        rtol=rtol,
                        atol=atol,
                    )


if __name__ == "__main__":
    tf.test.main()
