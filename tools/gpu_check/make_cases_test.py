"""The GPU check's cases and its comparison, tested on the CPU: the cases cover
every op of the library in every dtype its GPU kernels take (the ops and
kernels read from TensorFlow's registries), regenerate byte for byte, pass
each family's own checks (its cases module's check_cases), and compare_outputs
(the comparison gpu_check runs) passes the CPU outputs and catches planted
wrong ones."""

import os
import subprocess
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

# The CUDA build registers its GPU kernels only where they can run (docs/gpu.md,
# "Driver and architecture"), and the cases are checked against those kernels:
# the op library is told, through its test hook, of a driver and a GPU it has
# code for, machine or not. Set before the library loads.
os.environ.setdefault("TFCO_FAKE_CUDA_DRIVER_VERSION", "13000")
os.environ.setdefault("TFCO_FAKE_CUDA_DEVICES", "9.0")

import tensorflow_customops as tfco  # noqa: E402
from tensorflow_customops.python.ops import load_library
from tools.gpu_check import case_file, make_cases

_PREFIX = "CustomOps>"


def _case_dtypes(case, fixed):
    return {t.dtype for k, t in case.inputs.items() if k not in fixed}


def _kernel_dtypes(op_def, device):
    """The dtypes `device`'s kernels of the op accept; a kernel without a type
    constraint (of a list(type) attr) accepts every type the OpDef allows. A
    GPU kernel with every argument in host memory runs the CPU functor, so it
    has no GPU functor to check."""
    args = {a.name for a in list(op_def.input_arg) + list(op_def.output_arg)}
    dtypes = set()
    for kernel in kernels.get_registered_kernels_for_op(op_def.name).kernel:
        if kernel.device_type != device or args <= set(kernel.host_memory_arg):
            continue
        constrained = [c.allowed_values.list.type for c in kernel.constraint]
        if not constrained:
            constrained = [
                a.allowed_values.list.type
                for a in op_def.attr
                if a.type in ("type", "list(type)")
            ]
        for types in constrained:
            dtypes |= {tf.dtypes.as_dtype(t).name for t in types}
    return dtypes


def _compare(cases_path, actual_path):
    binary = os.path.join(os.path.dirname(__file__), "compare_outputs")
    result = subprocess.run(
        [binary, cases_path, actual_path], capture_output=True, text=True, check=False
    )
    lines = result.stdout.splitlines()
    failed = {line.split()[1].rstrip(":") for line in lines if line.startswith("FAIL ")}
    return result.returncode, failed, lines[-1] if lines else result.stderr


def _outputs_only(cases):
    return [case_file.Case(c.name, c.op, {}, {}, dict(c.outputs)) for c in cases]


def _shift(tensor, rtol, atol):
    """A copy of `tensor` whose first element moved well beyond tolerance."""
    values = tensor.as_float64().ravel()
    e = values[0]
    if tensor.dtype.startswith(("int", "uint")):
        moved = e + 1
    else:
        moved = e + max(4 * (atol + rtol * abs(e)), 1.0)
    return _with_first(tensor, moved)


def _first_finite_float(case):
    """The first output key (sorted) of `case` that is floating point with a
    finite first element, or None."""
    for key in sorted(case.outputs):
        tensor = case.outputs[key]
        if tensor.dtype.startswith(("float", "bfloat")) and tensor.value.size:
            if np.isfinite(tensor.as_float64().ravel()[0]):
                return key
    return None


def _with_first(tensor, value):
    new = tensor.value.copy().ravel()
    if tensor.dtype == "bfloat16":
        bits = np.array([value], np.float32).view(np.uint32)
        new[0] = ((bits + 0x8000) >> 16).astype(np.uint16)[0]
    else:
        new[0] = value
    return case_file.Tensor(tensor.dtype, new.reshape(tensor.value.shape))


class MakeCasesTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.modules = make_cases.modules()
        with tf.device("/CPU:0"):
            cls.by_module = [(m, m.cases()) for m in cls.modules]
        cls.cases = [c for _, cases in cls.by_module for c in cases]
        cls.data = case_file.dumps(cls.cases)

    def test_regenerates_byte_for_byte(self):
        self.assertEqual(case_file.dumps(make_cases.all_cases()), self.data)

    def test_file_round_trip(self):
        again = case_file.loads(self.data)
        self.assertEqual(case_file.dumps(again), self.data)
        self.assertEqual([c.name for c in again], [c.name for c in self.cases])
        with self.assertRaisesRegex(ValueError, "truncated"):
            case_file.loads(self.data[:-1])
        with self.assertRaisesRegex(ValueError, "bad magic"):
            case_file.loads(b"X" + self.data[1:])

    def test_shards_hold_every_case_once_dealt_back_and_forth(self):
        with (
            tempfile.TemporaryDirectory() as tmp,
            mock.patch.object(make_cases, "all_cases", lambda: self.cases),
        ):
            path = os.path.join(tmp, "cases")
            make_cases.main([path, "--shards", "3"])
            shards = [case_file.read(f"{path}.{k}") for k in range(3)]
            self.assertFalse(os.path.exists(path))
        names = [c.name for c in self.cases]
        # Cases 0, 1, 2 go to shards 0, 1, 2; cases 3, 4, 5 to 2, 1, 0; ...
        dealt = [[], [], []]
        for i, name in enumerate(names):
            dealt[[0, 1, 2, 2, 1, 0][i % 6]].append(name)
        self.assertEqual([[c.name for c in shard] for shard in shards], dealt)

    def test_every_op_in_every_gpu_dtype(self):
        by_op = {}
        for module, cases in self.by_module:
            fixed = getattr(module, "FIXED_DTYPE_INPUTS", ())
            for case in cases:
                by_op.setdefault(case.op, set()).update(_case_dtypes(case, fixed))
        no_gpu_code = make_cases.no_gpu_code()
        op_defs = load_library.op_list().op
        self.assertNotEmpty(op_defs)
        names = {op_def.name[len(_PREFIX) :] for op_def in op_defs}
        self.assertLessEqual(set(no_gpu_code), names, "NO_GPU_CODE names no op")
        for op_def in op_defs:
            op, name = op_def.name, op_def.name[len(_PREFIX) :]
            if name in no_gpu_code:
                self.assertNotIn(name, by_op)
                continue
            self.assertIn(
                name,
                by_op,
                f"{op} has no GPU check case: add some in tools/gpu_check/cases, "
                "or list it in its family's NO_GPU_CODE there",
            )
            gpu = _kernel_dtypes(op_def, "GPU")
            if tfco.build_info()["cuda"]:
                self.assertEqual(by_op[name], gpu, f"{op}: cases vs GPU kernels")
            else:
                self.assertEmpty(gpu)
                self.assertLessEqual(by_op[name], _kernel_dtypes(op_def, "CPU"), op)

    def test_family_checks(self):
        checked = 0
        for module, cases in self.by_module:
            if hasattr(module, "check_cases"):
                with self.subTest(family=module.__name__):
                    module.check_cases(self, cases)
                    checked += 1
        if not checked:
            self.skipTest("no family's cases module defines check_cases")

    def test_comparison_passes_cpu_outputs(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases_path = os.path.join(tmp, "cases")
            actual_path = os.path.join(tmp, "actual")
            case_file.write(cases_path, self.cases)
            case_file.write(actual_path, _outputs_only(self.cases))
            rc, failed, summary = _compare(cases_path, actual_path)
        self.assertEqual(failed, set())
        self.assertEqual(summary, f"{len(self.cases)} passed, 0 failed")
        self.assertEqual(rc, 0)

    def test_comparison_catches_planted_errors(self):
        actual = _outputs_only(self.cases)
        planted = set()
        within = set()
        first_of_op = {}
        for i, case in enumerate(self.cases):
            first_of_op.setdefault(case.op, i)
        for i in first_of_op.values():
            case, wrong = self.cases[i], actual[i]
            key = sorted(case.outputs)[0]
            wrong.outputs[key] = _shift(
                case.outputs[key], case.attrs["rtol"], case.attrs["atol"]
            )
            planted.add(case.name)
        # A NaN where the CPU has a number, a missing output, a missing case.
        nan = next(
            i
            for i, c in enumerate(self.cases)
            if c.name not in planted and _first_finite_float(c) is not None
        )
        key = _first_finite_float(self.cases[nan])
        actual[nan].outputs[key] = _with_first(self.cases[nan].outputs[key], np.nan)
        planted.add(self.cases[nan].name)
        missing = next(i for i, c in enumerate(self.cases) if c.name not in planted)
        del actual[missing].outputs[sorted(self.cases[missing].outputs)[0]]
        planted.add(self.cases[missing].name)
        dropped = len(actual) - 1
        planted.add(actual[dropped].name)
        # Differences inside the tolerance pass.
        for i, case in enumerate(self.cases[:dropped]):
            key = _first_finite_float(case)
            if case.attrs["atol"] > 0 and case.name not in planted and key:
                tensor = case.outputs[key]
                e = tensor.as_float64().ravel()[0]
                actual[i].outputs[key] = _with_first(
                    tensor, e + 0.5 * case.attrs["atol"]
                )
                within.add(case.name)
        # Unless every case is exact (a repository of exact ops only).
        if any(c.attrs["atol"] > 0 for c in self.cases):
            self.assertNotEmpty(within)
        with tempfile.TemporaryDirectory() as tmp:
            cases_path = os.path.join(tmp, "cases")
            actual_path = os.path.join(tmp, "actual")
            case_file.write(cases_path, self.cases)
            case_file.write(actual_path, actual[:dropped])
            rc, failed, summary = _compare(cases_path, actual_path)
        self.assertEqual(failed, planted)
        self.assertEqual(
            summary, f"{len(self.cases) - len(planted)} passed, {len(planted)} failed"
        )
        self.assertEqual(rc, 1)


if __name__ == "__main__":
    tf.test.main()
