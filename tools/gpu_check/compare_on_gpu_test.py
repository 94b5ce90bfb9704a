"""compare_on_gpu.py on the CPU, with a comparison module of its own and a
stand-in for gpu_check --bench: it finds the modules of compare/, skips one
whose imports fail, sums the parity failures into its exit status, times
every module's cases in one gpu_check run and writes the speed table, and
times the variant builds' stand-ins alternately beside it."""

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

# gpu_check --bench CASES --repeats N: one JSON object per case, its times
# those of the build's `ms` (a list: one per run), and its name appended to
# runs.txt. A negative time stands for a failed run.
_GPU_CHECK = """#!{python}
import sys
sys.path.insert(0, {folder!r})
import case_file
assert sys.argv[1] == "--bench" and sys.argv[3] == "--repeats"
with open({folder!r} + "/runs.txt", "a+") as f:
    f.seek(0)
    ms = {ms!r}[f.read().split().count({name!r})]
    f.write({name!r} + "\\n")
if ms < 0:
    sys.exit("no device")
for c in case_file.read(sys.argv[2]):
    print('{{"case": "%s", "fwd_ms": %s, "fwd_bwd_ms": %s}}' % (c.name, ms, 2 * ms))
"""


class CompareOnGpuTest(unittest.TestCase):
    def _run(self, fail, variants=()):
        """compare_on_gpu.py's output and speed.json, with the builds of
        `variants` ((name, ms of each run)) beside gpu_check."""
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
        for name, ms in (("main", [1.0, 1.0]),) + tuple(variants):
            folder = tmp if name == "main" else os.path.join(tmp, "variants", name)
            os.makedirs(folder, exist_ok=True)
            gpu_check = os.path.join(folder, "gpu_check")
            with open(gpu_check, "w") as f:
                f.write(
                    _GPU_CHECK.format(
                        python=sys.executable, folder=tmp, name=name, ms=ms
                    )
                )
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
        self.runs = open(os.path.join(tmp, "runs.txt")).read().split()
        self.variant_speed = os.path.join(tmp, "out", "variant_speed.json")
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

    def test_variants_alternate_with_main(self):
        result, speed = self._run(
            fail=0, variants=[("fast", [0.25, 0.75]), ("broken", [0.5, -1])]
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        # Two runs each, the second in reverse order; the failed run is
        # reported and its build left out.
        self.assertEqual(
            self.runs, ["main", "broken", "fast", "fast", "broken", "main"]
        )
        self.assertIn(
            "variant broken: gpu_check --bench failed: no device", result.stdout
        )
        self.assertIn("| case | pass | main | fast | other_lib |", result.stdout)
        self.assertIn(
            "| big/NCHW | fwd+bwd | 2.000 | 1.000 (2.00x) | 8.000 |", result.stdout
        )
        self.assertIn(
            "| big/NHWC | fwd | 1.000 | 0.500 (2.00x) | 2.000 |", result.stdout
        )
        self.assertEqual(speed["mine"][0]["tfco_nhwc_fwd"], 1.0)
        with open(self.variant_speed) as f:
            times = json.load(f)
        self.assertEqual(sorted(times), ["fast", "main"])
        self.assertEqual(
            times["fast"]["big/NHWC"],
            {"case": "big/NHWC", "fwd_ms": 0.5, "fwd_bwd_ms": 1.0},
        )

    def test_no_variants_one_run(self):
        result, _ = self._run(fail=0)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.runs, ["main"])
        self.assertNotIn("variants:", result.stdout)
        self.assertFalse(os.path.exists(self.variant_speed))

    def test_parity_failures_fail(self):
        result, _ = self._run(fail=2)
        self.assertEqual(result.returncode, 1)
        self.assertIn("mine vs other_lib parity: 1 passed, 2 failed", result.stdout)


if __name__ == "__main__":
    unittest.main()
