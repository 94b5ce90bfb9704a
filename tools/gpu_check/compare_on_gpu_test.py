"""compare_on_gpu.py on the CPU, with a comparison module of its own and a
stand-in for gpu_check --bench: it finds the modules of compare/, skips one
whose imports fail, sums the parity failures into its exit status, times
every module's cases in one gpu_check run and writes the speed table."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from tools.gpu_check import case_file

_HERE = os.path.dirname(os.path.abspath(__file__))

_MODULE = """
import case_file
import numpy as np
from compare import layout_rows

OTHER = "other_lib"
FAIL = {fail}


def parity(cases, ours):
    rows = [f"PASS {{c.name}}" for c in cases if c.name in ours]
    return rows + ["FAIL planted"] * FAIL, FAIL


def bench_cases():
    x = case_file.Tensor("float32", np.zeros([1], np.float32))
    return [
        case_file.Case(f"big/{{layout}}", "Op", {{}}, {{"x": x}})
        for layout in ("NHWC", "NCHW")
    ]


def speed(ours, repeats):
    return layout_rows(bench_cases(), ours, lambda case, n: (2.0, 8.0), repeats)
"""

# gpu_check --bench CASES --repeats N: one JSON object per case.
_GPU_CHECK = """#!{python}
import sys
sys.path.insert(0, {folder!r})
import case_file
assert sys.argv[1] == "--bench" and sys.argv[3] == "--repeats"
for c in case_file.read(sys.argv[2]):
    print('{{"case": "%s", "fwd_ms": 1.0, "fwd_bwd_ms": 2.0}}' % c.name)
"""


class CompareOnGpuTest(unittest.TestCase):
    def _run(self, fail):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        os.makedirs(os.path.join(tmp, "compare"))
        os.makedirs(os.path.join(tmp, "out"))
        for name in ("case_file.py", "compare_on_gpu.py", "compare/__init__.py"):
            shutil.copy(os.path.join(_HERE, name), os.path.join(tmp, name))
        with open(os.path.join(tmp, "compare", "mine.py"), "w") as f:
            f.write(_MODULE.format(fail=fail))
        with open(os.path.join(tmp, "compare", "other.py"), "w") as f:
            f.write("import no_such_module_here\n")
        gpu_check = os.path.join(tmp, "gpu_check")
        with open(gpu_check, "w") as f:
            f.write(_GPU_CHECK.format(python=sys.executable, folder=tmp))
        os.chmod(gpu_check, 0o755)
        one = case_file.Case(
            "a", "Op", {}, {}, {"y": case_file.Tensor("float32", np.ones([2]))}
        )
        case_file.write(os.path.join(tmp, "cases.bin"), [one])
        case_file.write(os.path.join(tmp, "out", "gpu_outputs.bin"), [one])
        result = subprocess.run(
            [sys.executable, os.path.join(tmp, "compare_on_gpu.py"), "--dir", tmp]
            + ["--out", os.path.join(tmp, "out"), "--repeats", "3"],
            capture_output=True,
            text=True,
            check=False,
        )
        with open(os.path.join(tmp, "out", "speed.json")) as f:
            speed = json.load(f)
        return result, speed

    def test_runs_each_module(self):
        result, speed = self._run(fail=0)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(
            "other: skipped: No module named 'no_such_module_here'", result.stdout
        )
        self.assertIn(
            "PASS a\nmine vs other_lib parity: 1 passed, 0 failed", result.stdout
        )
        self.assertIn("| big | fwd | 1.000 | 1.000 | 2.000 | 2.00x |", result.stdout)
        self.assertIn(
            "| big | fwd+bwd | 2.000 | 2.000 | 8.000 | 4.00x |", result.stdout
        )
        self.assertEqual(
            speed,
            {
                "mine": [
                    dict(
                        case="big",
                        tfco_nhwc_fwd=1.0,
                        tfco_nchw_fwd=1.0,
                        other_fwd=2.0,
                        tfco_nhwc_fwd_bwd=2.0,
                        tfco_nchw_fwd_bwd=2.0,
                        other_fwd_bwd=8.0,
                    )
                ]
            },
        )

    def test_parity_failures_fail(self):
        result, _ = self._run(fail=2)
        self.assertEqual(result.returncode, 1)
        self.assertIn("mine vs other_lib parity: 1 passed, 2 failed", result.stdout)


if __name__ == "__main__":
    unittest.main()
