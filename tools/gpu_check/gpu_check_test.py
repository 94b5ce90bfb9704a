"""The gpu_check executable (built under --config=cuda): it needs no
TensorFlow library, it has a runner for every op and XLA custom call with
cases and cases for every one it has a runner for, its XLA handlers are the
CUDA handlers the XLA library registers with TensorFlow, and it runs every
case where a GPU is present, or says there is none and fails."""

import os
import subprocess
import tempfile

import tensorflow as tf

import tensorflow_customops as tfco
from tools.gpu_check import case_file, make_cases

_BINARY = os.path.join(os.path.dirname(__file__), "gpu_check")


class GpuCheckTest(tf.test.TestCase):
    def test_needs_no_tensorflow_or_cuda_library(self):
        ldd = subprocess.run(
            ["ldd", _BINARY], capture_output=True, text=True, check=True
        )
        for library in ("tensorflow", "cudart", "libstdc++", "libgcc_s"):
            self.assertNotIn(library, ldd.stdout)
        self.assertIn("libc.so", ldd.stdout)

    def test_usage(self):
        result = subprocess.run([_BINARY], capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("usage: gpu_check CASES", result.stderr)

    def test_a_runner_for_every_op_with_cases(self):
        # --list needs no GPU: the runners/ files' registrations, and the XLA
        # custom calls' CUDA handlers (xla:<target>), against the cases/
        # modules' ops: a handler without cases fails here.
        listed = subprocess.run(
            [_BINARY, "--list"], capture_output=True, text=True, check=True
        ).stdout.split()
        self.assertEqual(listed, sorted(listed))
        with_cases = {c.op for c in make_cases.all_cases()}
        self.assertEqual(
            sorted(set(listed) - with_cases), [], "runners or handlers without cases"
        )
        self.assertEqual(sorted(with_cases - set(listed)), [], "cases without runners")
        # The CUDA handlers the XLA library registered with TensorFlow's XLA
        # (build_info): one in a library outside TFCO_FFI_HANDLERS (ops.bzl)
        # would be missing from gpu_check.
        handlers = [op for op in listed if op.startswith("xla:")]
        registered = tfco.build_info()["xla_ffi_handlers"].get("CUDA", [])
        self.assertEqual(handlers, [f"xla:{target}" for target in registered])
        if tfco.build_info()["xla_custom_call_api"] == "typed_ffi":
            self.assertNotEmpty(handlers)

    def test_runs_every_case_or_says_no_device(self):
        cases = make_cases.all_cases()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cases")
            case_file.write(path, cases)
            result = subprocess.run(
                [_BINARY, path], capture_output=True, text=True, check=False
            )
        if result.returncode == 3:
            self.assertRegex(result.stderr, r"^gpu_check: no CUDA device \(.+\)\n$")
            self.assertEqual(result.stdout, "")
        else:
            self.assertEqual(
                result.stdout.splitlines()[-1], f"{len(cases)} passed, 0 failed"
            )
            self.assertEqual(result.returncode, 0)

    def test_stream_done(self):
        # TfcoWhenStreamDone's own check; after a device fault too, except
        # under the emulation, whose kernels run when launched (it says so).
        for mode in ([], ["fault"]):
            with self.subTest(mode=mode):
                result = subprocess.run(
                    [_BINARY, "--stream-done", *mode],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if result.returncode == 3:
                    self.assertIn("no CUDA device", result.stderr)
                    continue
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                lines = result.stdout.splitlines()
                if mode and "CUDA emulated on the CPU" in result.stderr:
                    self.assertTrue(lines[0].startswith("SKIP stream-done/"), lines)
                    self.assertEqual(lines[-1], "0 passed, 0 failed")
                else:
                    self.assertEqual(lines[-1], "1 passed, 0 failed")


if __name__ == "__main__":
    tf.test.main()
