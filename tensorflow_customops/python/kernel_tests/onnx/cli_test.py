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

import tensorflow_customops as tfco
from tensorflow_customops import onnx as onnx_cli
from tensorflow_customops.python.kernel_tests.onnx import onnx_test_util


class Clipper(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def __call__(self, x):
        clipped, norm = tfco.clip_by_global_norm([x], 1.0)
        return {"clipped": clipped[0], "norm": norm}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def gradient(self, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            clipped, _ = tfco.clip_by_global_norm([x], 1.0)
        return {"gradient": tape.gradient(clipped[0], x)}


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.saved = os.path.join(cls.directory, "saved")
        module = Clipper()
        tf.saved_model.save(
            module,
            cls.saved,
            signatures={
                "serving_default": module.__call__,
                "gradient": module.gradient,
            },
        )

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
        output = os.path.join(self.directory, "clipper.onnx")
        code, stdout, stderr = self._command(self.saved, output)
        self.assertEqual(code, 0, stderr)
        self.assertIn(f"wrote {output} (opset 16, target onnxruntime)", stdout)
        model = onnx.load(output)
        onnx.checker.check_model(model, full_check=True)
        x = np.array([[3, 4, 0], [0, 0, 12]], np.float32)
        clipped, norm = onnx_test_util.run(model, [x])
        np.testing.assert_allclose(clipped, x / 13, rtol=1e-6)
        np.testing.assert_allclose(norm, 13, rtol=1e-6)

    def test_opset_and_target(self):
        output = os.path.join(self.directory, "clipper17.onnx")
        code, stdout, stderr = self._cli(
            self.saved, output, "--opset", "17", "--target", "tensorrt"
        )
        self.assertEqual(code, 0, stderr)
        self.assertIn("(opset 17, target tensorrt)", stdout)

    def test_export_error(self):
        code, _, stderr = self._command(
            self.saved,
            os.path.join(self.directory, "g.onnx"),
            "--signature",
            "gradient",
        )
        self.assertEqual(code, 1)
        self.assertIn(
            "inference graphs only: the graph holds gradient ops",
            self._error_line(stderr),
        )
        self.assertFalse(os.path.exists(os.path.join(self.directory, "g.onnx")))

    def test_opset_too_low(self):
        code, _, stderr = self._cli(self.saved, "x.onnx", "--opset", "15")
        self.assertEqual(code, 1)
        self.assertIn(
            "opset 15 is too low: CustomOps>ClipByGlobalNorm needs opset 16",
            self._error_line(stderr),
        )

    def test_no_such_signature(self):
        code, _, stderr = self._cli(self.saved, "x.onnx", "--signature", "nope")
        self.assertEqual(code, 1)
        self.assertIn(
            "no signature 'nope'; it has ['gradient', 'serving_default']",
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
