"""tfco.onnx.export: what it takes (tf.function, Keras model, SavedModel),
the opset it picks, what it refuses and why, and that it imports tf2onnx only
when it runs."""

import os
import pathlib
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np
import onnx
import tensorflow as tf
import tf2onnx.convert  # registers TensorFlow's handlers

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.onnx import export as export_lib
from tensorflow_customops.python.onnx import handler_util
from tensorflow_customops.python.ops import load_library

_VECTOR = [tf.TensorSpec([None], tf.float32)]


def _zero_out(x):
    return tfco.zero_out(x, keep=2)


def _opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


class Doubler(tf.Module):
    """A SavedModel with a variable and two signatures."""

    def __init__(self):
        super().__init__()
        self.scale = tf.Variable([[2.0, 0.0], [0.0, 3.0]])

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def __call__(self, x):
        return {"product": tfco.matrix_mul(x, self.scale)}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def zeroed(self, x):
        return {"zeroed": tfco.zero_out(x, keep=3)}


class ExportTest(unittest.TestCase):
    def test_function_with_its_own_signature(self):
        fn = tf.function(_zero_out, input_signature=_VECTOR)
        x = np.arange(1, 6, dtype=np.float32)
        model = tfco.onnx.export(fn)
        np.testing.assert_array_equal(
            onnx_test_util.run(model, [x])[0], [1, 2, 0, 0, 0]
        )

    def test_function_with_a_given_signature(self):
        expected, got, _ = onnx_test_util.export_and_run(
            tf.function(_zero_out), _VECTOR, [np.arange(1, 4, dtype=np.float32)]
        )
        np.testing.assert_array_equal(got[0], expected[0])

    def test_function_without_a_signature_is_refused(self):
        with self.assertRaisesRegex(ValueError, "no input_signature of its own"):
            tfco.onnx.export(tf.function(_zero_out))

    def test_keras_model(self):
        inputs = tf.keras.Input((4,), name="features")
        dense = tf.keras.layers.Dense(3, name="dense")(inputs)
        zeroed = tf.keras.layers.Lambda(_zero_out, name="zeroed")(dense)
        model = tf.keras.Model(inputs, zeroed)
        x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
        onnx_model = tfco.onnx.export(model)
        self.assertEqual([o.name for o in onnx_model.graph.output], ["zeroed"])
        np.testing.assert_allclose(
            onnx_test_util.run(onnx_model, [x])[0], model(x), rtol=1e-6, atol=1e-6
        )
        # A dynamic batch: the same model for another batch size.
        got = onnx_test_util.run(onnx_model, [x[:2]])[0]
        self.assertEqual(got.shape, (2, 3))

    def test_saved_model_directory_and_path(self):
        module = Doubler()
        x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
        with tempfile.TemporaryDirectory() as directory:
            saved = os.path.join(directory, "saved")
            tf.saved_model.save(
                module,
                saved,
                signatures={
                    "serving_default": module.__call__,
                    "zeroed": module.zeroed,
                },
            )
            written = os.path.join(directory, "model.onnx")
            for source in (saved, os.path.join(directory, "saved/")):
                model = tfco.onnx.export(source, path=written)
                self.assertEqual([o.name for o in model.graph.output], ["product"])
                np.testing.assert_array_equal(
                    onnx_test_util.run(model, [x])[0], x * [2, 3]
                )
                self.assertEqual(onnx.load(written), model)
            model = tfco.onnx.export(pathlib.Path(saved), signature="zeroed")
            self.assertEqual([o.name for o in model.graph.output], ["zeroed"])
            np.testing.assert_array_equal(
                onnx_test_util.run(model, [x])[0], [[1, 2], [3, 0], [0, 0]]
            )
            with self.assertRaisesRegex(
                tfco.onnx.ExportError,
                r"no signature 'other'; it has \['serving_default', 'zeroed'\]",
            ):
                tfco.onnx.export(saved, signature="other")
            with self.assertRaisesRegex(
                tfco.onnx.ExportError, "not a SavedModel directory"
            ):
                tfco.onnx.export(directory)
            with self.assertRaisesRegex(ValueError, "input_signature must be None"):
                tfco.onnx.export(saved, _VECTOR)

    def test_signature_only_with_a_saved_model(self):
        with self.assertRaisesRegex(ValueError, "SavedModel directory only"):
            tfco.onnx.export(tf.function(_zero_out), _VECTOR, signature="zeroed")

    def test_not_a_model(self):
        with self.assertRaisesRegex(TypeError, "got int"):
            tfco.onnx.export(3)

    def test_unknown_rank_input_is_refused(self):
        # tf2onnx would declare it a scalar, and ORT then folds its shape.
        with self.assertRaisesRegex(
            tfco.onnx.ExportError, "input 'x' has no known rank"
        ):
            tfco.onnx.export(tf.function(_zero_out), [tf.TensorSpec(None, tf.float32)])

    def test_opset_16_by_default(self):
        model = tfco.onnx.export(tf.function(_zero_out), _VECTOR)
        self.assertEqual(_opset(model), 16)
        self.assertEqual(model.ir_version, 8)

    def test_opset_is_the_lowest_that_holds_every_op(self):
        # ZeroOut declared as needing opset 19 (as DeformConv does): the
        # export picks 19, beyond tf2onnx's table, and the model runs in ORT.
        table = dict(tf2onnx.constants.OPSET_TO_IR_VERSION)
        with mock.patch.dict(handler_util.MIN_OPSETS, {"CustomOps>ZeroOut": 19}):
            fn = tf.function(_zero_out)
            expected, got, model = onnx_test_util.export_and_run(
                fn, _VECTOR, [np.ones(3, np.float32)]
            )
            self.assertEqual(_opset(model), 19)
            self.assertEqual(model.ir_version, 9)
            np.testing.assert_array_equal(got[0], expected[0])
            with self.assertRaisesRegex(
                tfco.onnx.ExportError,
                r"opset 18 is too low: CustomOps>ZeroOut needs opset 19",
            ):
                tfco.onnx.export(fn, _VECTOR, opset=18)
        # The table is tf2onnx's again.
        self.assertEqual(tf2onnx.constants.OPSET_TO_IR_VERSION, table)

    def test_explicit_opsets(self):
        fn = tf.function(_zero_out)
        for opset in (17, 18, 19):
            self.assertEqual(_opset(tfco.onnx.export(fn, _VECTOR, opset=opset)), opset)
        with self.assertRaisesRegex(
            tfco.onnx.ExportError,
            "opset 15 is too low: CustomOps>ZeroOut needs opset 16",
        ):
            tfco.onnx.export(fn, _VECTOR, opset=15)
        with self.assertRaisesRegex(
            tfco.onnx.ExportError, r"opset 20: tf2onnx 1\.17\.0 writes opsets 1 to 19"
        ):
            tfco.onnx.export(fn, _VECTOR, opset=20)
        with self.assertRaisesRegex(ValueError, "opset must be an int or None"):
            tfco.onnx.export(fn, _VECTOR, opset="16")
        # A graph of TensorFlow ops only exports at any opset tf2onnx writes.
        plain = tf.function(lambda x: x * 2.0)
        self.assertEqual(_opset(tfco.onnx.export(plain, _VECTOR, opset=13)), 13)

    def test_bad_target(self):
        with self.assertRaisesRegex(
            ValueError, 'target must be "onnxruntime" or "tensorrt", got \'trt\''
        ):
            tfco.onnx.export(tf.function(_zero_out), _VECTOR, target="trt")

    def test_target_reaches_the_handlers(self):
        with mock.patch.object(
            handler_util, "exporting", wraps=handler_util.exporting
        ) as exporting:
            tfco.onnx.export(tf.function(_zero_out), _VECTOR, target="tensorrt")
        exporting.assert_called_once_with("tensorrt")

    def test_op_without_handler_is_named(self):
        def fn(x):
            return tf.math.igamma(x, x) + tf.math.zeta(x, x)

        with self.assertRaisesRegex(
            tfco.onnx.ExportError,
            r"no ONNX handler at opset 16 for: Igamma \(node 'Igamma'\), "
            r"Zeta \(node 'Zeta'\)",
        ):
            tfco.onnx.export(tf.function(fn), _VECTOR)

    def test_op_without_handler_in_a_loop_body_is_named(self):
        def fn(x):
            return tf.while_loop(
                lambda i, y: i < 3, lambda i, y: (i + 1, tf.math.igamma(y, y)), (0, x)
            )[1]

        with self.assertRaisesRegex(
            tfco.onnx.ExportError, r"no ONNX handler .* Igamma"
        ):
            tfco.onnx.export(tf.function(fn), _VECTOR)

    def test_asserts_are_not_converted(self):
        # An Assert reaches no output: tf2onnx leaves it out, as it leaves out
        # CheckNumerics; it is not an op without a handler.
        def fn(x):
            tf.debugging.assert_all_finite(x, "finite")
            with tf.control_dependencies([tf.debugging.assert_positive(x)]):
                return _zero_out(x)

        x = np.array([1, 2, 3], np.float32)
        expected, got, _ = onnx_test_util.export_and_run(tf.function(fn), _VECTOR, [x])
        np.testing.assert_array_equal(got[0], expected[0])

    def test_gradient_ops_are_refused(self):
        def fn(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                clipped, _ = tfco.clip_by_global_norm([x], 1.0)
            return tape.gradient(clipped[0], x)

        with self.assertRaisesRegex(
            tfco.onnx.ExportError,
            r"inference graphs only: .*CustomOps>ClipByGlobalNormGrad \(node '.*'\)",
        ):
            tfco.onnx.export(tf.function(fn), _VECTOR)

    def test_gradient_ops(self):
        self.assertTrue(export_lib.is_gradient_op("CustomOps>RoiAlignGradBoxes"))
        self.assertFalse(export_lib.is_gradient_op("CustomOps>RoiAlign"))
        self.assertFalse(export_lib.is_gradient_op("StopGradient"))

    def test_model_is_checked(self):
        with mock.patch.object(
            onnx.checker, "check_model", wraps=onnx.checker.check_model
        ) as check:
            model = tfco.onnx.export(tf.function(_zero_out), _VECTOR)
        check.assert_called_once_with(model, full_check=True)

    def test_invalid_model_is_refused(self):
        # A handler that leaves a node ONNX does not know, and one that fails
        # (tf2onnx logs it and keeps the TensorFlow node): the checker's
        # failure becomes an ExportError, with tf2onnx's logged errors.
        def broken(ctx, node, **kwargs):
            node.type = "NoSuchOp"

        def failing(ctx, node, **kwargs):
            raise RuntimeError("the handler failed")

        handlers = tf2onnx.handler.tf_op.get_opsets()[tf2onnx.constants.ONNX_DOMAIN]
        fn = tf.function(lambda x: tf.math.igamma(x, x))
        for handler, message in (
            (broken, "the converted model is invalid: .*NoSuchOp"),
            (
                failing,
                "(?s)the converted model is invalid: .*Igamma.*\n"
                "  tf2onnx: Failed to convert node 'Igamma' .*"
                "RuntimeError\\('the handler failed'\\)",
            ),
        ):
            handlers[1]["Igamma"] = (handler, {})
            try:
                with self.assertRaisesRegex(tfco.onnx.ExportError, message):
                    tfco.onnx.export(fn, _VECTOR)
            finally:
                del handlers[1]["Igamma"]

    def test_refusals_are_raised(self):
        ops = load_library.load_op_library()
        fn = tf.function(lambda x: ops.custom_ops_zero_out(to_zero=x, keep=-1))
        with self.assertRaisesRegex(
            tfco.onnx.ExportError,
            r"CustomOps>ZeroOut \(node '.*'\): keep must be >= 0, got -1",
        ):
            tfco.onnx.export(fn, _VECTOR)


class ImportTest(unittest.TestCase):
    def _python(self, code):
        return subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        )

    def test_import_does_not_import_the_converter(self):
        result = self._python(
            "import sys\n"
            "import tensorflow_customops as tfco\n"
            "tfco.onnx.export, tfco.onnx.ExportError\n"
            "loaded = sorted(m for m in sys.modules\n"
            "    if m.split('.')[0] in ('tf2onnx', 'onnx', 'onnxruntime'))\n"
            "print('loaded:', loaded)\n"
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("loaded: []", result.stdout)

    def test_missing_converter_says_what_to_install(self):
        result = self._python(
            "import sys\n"
            "sys.modules['tf2onnx'] = None\n"
            "import tensorflow as tf\n"
            "import tensorflow_customops as tfco\n"
            "fn = tf.function(lambda x: x)\n"
            "tfco.onnx.export(fn, [tf.TensorSpec([1])])\n"
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(
            "ImportError: tfco.onnx needs tf2onnx and onnx (tf2onnx is missing): "
            "pip install tensorflow-customops[onnx]",
            result.stderr,
        )


if __name__ == "__main__":
    unittest.main()
