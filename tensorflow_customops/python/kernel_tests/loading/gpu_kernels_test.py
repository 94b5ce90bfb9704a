"""The GPU kernels are registered only where they can run (docs/gpu.md,
"Driver and architecture"): here, with no NVIDIA driver, never; on machines
given by the test hook (TFCO_FAKE_CUDA_DRIVER_VERSION, TFCO_FAKE_CUDA_DEVICES),
exactly as the portable kernels decide. Each such machine is a process of its own:
the decision is made once, when the op library loads."""

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

import tensorflow_customops as tfco
from tensorflow_customops.python import registry
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
import numpy as np
from tensorflow_customops.python import registry
ran = all(np.all(np.isfinite(o)) for o in registry.run_a_case())
print(json.dumps({
    "info": info,
    "devices": devices,
    "ran": bool(ran),
}))
"""


def _library_device_types():
    return {
        k.device_type
        for op in load_library.op_list().op
        for k in kernels.get_registered_kernels_for_op(op.name).kernel
    }


# The NVIDIA driver that first supports each CUDA major release (Linux).
_NVIDIA_DRIVER = {12: "525.60.13", 13: "580"}


def _floor_major():
    """The CUDA major release whose drivers this build's runtime needs (13
    with nvcc 13, 12 with --config=cuda12)."""
    return int(tfco.build_info()["cuda_driver_floor"].split(".")[0])


def _capability_without_code():
    """A compute capability below this build's oldest cubin: 7.0 under
    sm_75, 5.0 under sm_60."""
    oldest = int(build_info.CUDA_CAPABILITIES[0][len("sm_") :])
    major, minor = divmod(oldest, 10)
    return f"{major}.0" if minor else f"{major - 1}.0"


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
        for output in registry.run_a_case():
            self.assertTrue(np.all(np.isfinite(output)))

    def _require_cuda(self):
        if not build_info.CUDA:
            self.skipTest("the test hook applies to the CUDA build only")

    def _probe(self, driver_version, devices, driver_cuda_version):
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
        self.assertTrue(out["ran"])
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
        # A driver of the CUDA major release before the runtime's, e.g. a 550
        # driver (CUDA 12.4) under the nvcc 13 build's CUDA 13 runtime.
        self._require_cuda()
        major = _floor_major()
        out, stderr = self._probe(f"{major - 1}040", "8.0", f"{major - 1}.4")
        floor = out["info"]["cuda_driver_floor"]
        self.assertEqual(floor, f"{major}.0")
        self._assert_left_out(
            out,
            stderr,
            rf"^the NVIDIA driver supports CUDA {major - 1}\.4, and the GPU kernels, "
            rf"built with the CUDA {major}\.\d runtime, need a driver for CUDA "
            rf"{major}\.0 or newer \(NVIDIA {_NVIDIA_DRIVER[major]} or newer\)$",
        )

    def test_gpu_without_code(self):
        # Older than every cubin (Volta under nvcc 13's sm_75), and the PTX
        # is for 9.0.
        self._require_cuda()
        capability = _capability_without_code()
        major = _floor_major()
        out, stderr = self._probe(f"{major}000", f"8.0,{capability}", f"{major}.0")
        self._assert_left_out(
            out,
            stderr,
            rf"^no code in the library for GPU 1 \(compute capability "
            rf"{capability.replace('.', '[.]')}\): it holds sm_",
        )

    def test_driver_and_gpus_that_can_run_them(self):
        # The oldest driver the runtime runs on.
        self._require_cuda()
        major = _floor_major()
        out, stderr = self._probe(f"{major}000", "8.6,9.0", f"{major}.0")
        info = out["info"]
        self.assertTrue(info["gpu_kernels"], info["gpu_kernels_reason"])
        self.assertEqual(info["gpu_kernels_reason"], "")
        self.assertEqual(out["devices"], ["CPU", "GPU"])
        self.assertNotIn("no GPU kernels are registered", stderr)


if __name__ == "__main__":
    tf.test.main()
