"""The GPU kernels are registered only where they can run (docs/gpu.md,
"Driver and architecture"): here, with no NVIDIA driver, never; on machines
given by the test hook (TFCO_FAKE_CUDA_DRIVER_VERSION, TFCO_FAKE_CUDA_DEVICES),
exactly as the kernel core decides. Each such machine is a process of its own:
the decision is made once, when the op library loads."""

import ctypes
import json
import os
import subprocess
import sys

import tensorflow as tf
from tensorflow.python.framework import kernels

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.platform import build_info

_GPU_KEYS = (
    "gpu_kernels",
    "gpu_kernels_reason",
    "cuda_runtime_version",
    "cuda_driver_floor",
    "cuda_driver_version",
)

# Prints build_info() and the device types the library's ops have kernels
# for, after running an op (placed on the CPU: no GPU here).
_PROBE = """
import json
import tensorflow as tf
from tensorflow.python.framework import kernels
import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library
info = tfco.build_info()
devices = sorted({
    k.device_type
    for op in load_library.op_list().op
    for k in kernels.get_registered_kernels_for_op(op.name).kernel
})
zeroed = tfco.zero_out(tf.constant([3.0, 4.0]), keep=1).numpy().tolist()
print(json.dumps({
    "info": info,
    "devices": devices,
    "zeroed": zeroed,
}))
"""


def _library_device_types():
    return {
        k.device_type
        for op in load_library.op_list().op
        for k in kernels.get_registered_kernels_for_op(op.name).kernel
    }


def _has_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


class GpuKernelsTest(tf.test.TestCase):
    def test_this_machine(self):
        info = tfco.build_info()
        self.assertEqual(info["gpu_kernels"], info["gpu_kernels_reason"] == "")
        # Every op keeps its CPU kernels, and the registry agrees with
        # build_info.
        for op in load_library.op_list().op:
            devices = kernels.get_registered_kernels_for_op(op.name).kernel
            self.assertIn("CPU", {k.device_type for k in devices}, op.name)
        self.assertEqual("GPU" in _library_device_types(), info["gpu_kernels"])
        if not build_info.CUDA:
            self.assertFalse(info["gpu_kernels"])
            self.assertEqual(
                info["gpu_kernels_reason"], "this copy was built without CUDA kernels"
            )
            for key in _GPU_KEYS[2:]:
                self.assertEqual(info[key], "")
            return
        self.assertRegex(info["cuda_runtime_version"], r"^1\d\.\d$")
        major = info["cuda_runtime_version"].split(".")[0]
        self.assertEqual(info["cuda_driver_floor"], f"{major}.0")
        if not _has_driver():
            self.assertFalse(info["gpu_kernels"])
            self.assertEqual(info["gpu_kernels_reason"], "no CUDA driver")
            self.assertEqual(info["cuda_driver_version"], "")
        # The ops run, on the CPU here.
        self.assertAllEqual(tfco.zero_out(tf.constant([3.0, 4.0])), [3.0, 0.0])

    def _probe(self, driver_version, devices, driver_cuda_version):
        if not build_info.CUDA:
            self.skipTest("the test hook applies to the CUDA build only")
        env = dict(
            os.environ,
            TFCO_FAKE_CUDA_DRIVER_VERSION=driver_version,
            TFCO_FAKE_CUDA_DEVICES=devices,
            TF_CPP_MIN_LOG_LEVEL="0",
        )
        result = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        out = json.loads(result.stdout.strip().splitlines()[-1])
        # Every op still runs (on the CPU: this machine has no GPU).
        self.assertEqual(out["zeroed"], [3.0, 0.0])
        self.assertEqual(out["info"]["cuda_driver_version"], driver_cuda_version)
        return out, result.stderr

    def _assert_left_out(self, out, stderr, reason_pattern):
        info = out["info"]
        self.assertFalse(info["gpu_kernels"])
        self.assertRegex(info["gpu_kernels_reason"], reason_pattern)
        self.assertEqual(out["devices"], ["CPU"])
        # One warning, naming the reason.
        warnings = [
            line
            for line in stderr.splitlines()
            if "no GPU kernels are registered" in line
        ]
        self.assertLen(warnings, 1, stderr)
        self.assertRegex(warnings[0], r"^W")
        self.assertIn(info["gpu_kernels_reason"], warnings[0])

    def test_driver_older_than_the_runtime_needs(self):
        # A 550 driver (CUDA 12.4) under the kernels' CUDA 13 runtime.
        out, stderr = self._probe("12040", "8.0", "12.4")
        floor = out["info"]["cuda_driver_floor"]
        self.assertEqual(floor, "13.0")
        self._assert_left_out(
            out,
            stderr,
            r"^the NVIDIA driver supports CUDA 12\.4, and the GPU kernels, built "
            r"with the CUDA 13\.\d runtime, need a driver for CUDA 13\.0 or newer "
            r"\(NVIDIA 580 or newer\)$",
        )

    def test_gpu_without_code(self):
        # Volta: neither a cubin nor PTX it could compile.
        out, stderr = self._probe("13000", "8.0,7.0", "13.0")
        self._assert_left_out(
            out,
            stderr,
            r"^no code in the library for GPU 1 \(compute capability 7\.0\): it "
            r"holds sm_",
        )

    def test_driver_and_gpus_that_can_run_them(self):
        out, stderr = self._probe("13000", "8.6,9.0", "13.0")
        info = out["info"]
        self.assertTrue(info["gpu_kernels"], info["gpu_kernels_reason"])
        self.assertEqual(info["gpu_kernels_reason"], "")
        self.assertEqual(out["devices"], ["CPU", "GPU"])
        self.assertNotIn("no GPU kernels are registered", stderr)


if __name__ == "__main__":
    tf.test.main()
