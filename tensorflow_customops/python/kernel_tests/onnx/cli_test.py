"""python -m tensorflow_customops.onnx: a SavedModel to an .onnx file, and a
non-zero exit with a one-line message where it cannot. The command runs in a
process of its own twice; the other cases call its main() (each process
imports TensorFlow, seconds on CI)."""

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
import tensorflow as tf
import tf2onnx

from tensorflow_customops import onnx as onnx_cli
from tensorflow_customops.python import registry
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util
from tensorflow_customops.python.onnx import export, handler_util, handlers  # noqa: F401


def _exported_case():
    """The op and the first gradient case (small inputs) of the first
    registered op with an ONNX handler: the CLI's tests need some op of the
    library in a SavedModel, whichever ops it has."""
    for op, entry in registry.entries().items():
        if op in handler_util.MIN_OPSETS:
            for case in entry.gradient_cases():
                return op, case
    raise LookupError("no op with an ONNX handler has a gradient case")


def _signature(case, specs, prefix):
    """The case's forward as a signature whose outputs are named prefix_<i>."""
    return tf.function(
        lambda *x: {
            f"{prefix}_{i}": y for i, y in enumerate(tf.nest.flatten(case.forward(*x)))
        },
        input_signature=specs,
    )


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.saved = os.path.join(cls.directory, "saved")
        cls.op, case = _exported_case()
        cls.inputs, _ = case.tensors(tf.float32)
        specs = [tf.TensorSpec(x.shape, x.dtype) for x in cls.inputs]
        model = tf.Module()
        model.serve = _signature(case, specs, "output")
        model.other = _signature(case, specs, "other")
        cls.expected = {k: v.numpy() for k, v in model.serve(*cls.inputs).items()}
        tf.saved_model.save(
            model,
            cls.saved,
            signatures={"serving_default": model.serve, "other": model.other},
        )
        cls.opset = max(export.DEFAULT_OPSET, handler_util.MIN_OPSETS[cls.op])

    def _cli(self, *args):
        """Runs main(args) here: (exit code, stdout, stderr)."""
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = onnx_cli.main(list(args))
            except SystemExit as e:  # argparse's usage errors
                code = e.code
        return code, stdout.getvalue(), stderr.getvalue()

    def _command(self, *args):
        """Runs the command: (exit code, stdout, stderr)."""
        result = subprocess.run(
            [sys.executable, "-m", "tensorflow_customops.onnx", *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.directory,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        )
        return result.returncode, result.stdout, result.stderr

    def _error_line(self, stderr):
        lines = [
            line
            for line in stderr.splitlines()
            if line.startswith("python -m tensorflow_customops.onnx: error:")
        ]
        self.assertEqual(len(lines), 1, stderr)
        return lines[0]

    def test_saved_model_to_file(self):
        output = os.path.join(self.directory, "model.onnx")
        code, stdout, stderr = self._command(self.saved, output)
        self.assertEqual(code, 0, stderr)
        self.assertIn(
            f"wrote {output} (opset {self.opset}, target onnxruntime)", stdout
        )
        model = onnx.load(output)
        onnx.checker.check_model(model, full_check=True)
        names = [o.name for o in onnx_test_util.session(model).get_outputs()]
        self.assertCountEqual(names, self.expected)
        actual = onnx_test_util.run(model, [x.numpy() for x in self.inputs])
        for name, value in zip(names, actual):
            np.testing.assert_allclose(value, self.expected[name], rtol=1e-6, atol=1e-6)

    def test_opset_target_and_signature(self):
        # One above the default where tf2onnx writes it, to tell them apart.
        opset = self.opset + (self.opset + 1 in tf2onnx.constants.OPSET_TO_IR_VERSION)
        output = os.path.join(self.directory, "explicit.onnx")
        code, stdout, stderr = self._cli(
            self.saved,
            output,
            "--opset",
            str(opset),
            "--target",
            "tensorrt",
            "--signature",
            "other",
        )
        self.assertEqual(code, 0, stderr)
        self.assertIn(f"(opset {opset}, target tensorrt)", stdout)
        outputs = [o.name for o in onnx.load(output).graph.output]
        self.assertCountEqual(
            outputs, [name.replace("output_", "other_") for name in self.expected]
        )

    def test_export_error(self):
        output = os.path.join(self.directory, "e.onnx")
        code, _, stderr = self._command(self.saved, output, "--opset", "99")
        self.assertEqual(code, 1)
        self.assertRegex(
            self._error_line(stderr), r"opset 99: tf2onnx \S+ writes opsets \d+ to \d+"
        )
        self.assertFalse(os.path.exists(output))

    def test_opset_too_low(self):
        needs = handler_util.MIN_OPSETS[self.op]
        code, _, stderr = self._cli(self.saved, "x.onnx", "--opset", str(needs - 1))
        self.assertEqual(code, 1)
        self.assertIn(
            f"opset {needs - 1} is too low: {self.op} needs opset {needs}",
            self._error_line(stderr),
        )

    def test_no_such_signature(self):
        code, _, stderr = self._cli(self.saved, "x.onnx", "--signature", "nope")
        self.assertEqual(code, 1)
        self.assertIn(
            "no signature 'nope'; it has ['other', 'serving_default']",
            self._error_line(stderr),
        )

    def test_bad_path(self):
        missing = os.path.join(self.directory, "missing")
        code, _, stderr = self._cli(missing, "x.onnx")
        self.assertEqual(code, 1)
        self.assertIn(
            f"{missing}: not a SavedModel directory (no saved_model.pb)",
            self._error_line(stderr),
        )

    def test_unwritable_output(self):
        output = os.path.join(self.directory, "no", "such", "folder", "m.onnx")
        code, _, stderr = self._cli(self.saved, output)
        self.assertEqual(code, 1)
        self.assertIn(output, self._error_line(stderr))

    def test_bad_arguments(self):
        code, _, stderr = self._cli(self.saved, "x.onnx", "--target", "trt")
        self.assertEqual(code, 2)
        self.assertIn("invalid choice: 'trt'", stderr)
        code, _, stderr = self._cli(self.saved)
        self.assertEqual(code, 2)
        self.assertIn("the following arguments are required: output", stderr)


if __name__ == "__main__":
    unittest.main()
