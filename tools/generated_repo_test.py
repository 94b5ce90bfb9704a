"""A repository made by tools/new_repo.py builds and passes its tests: it is
generated in a scratch folder with its example op, its own tools/new_op.py
adds a second op there, touching only the two tables of the existing files,
both ops' spec history and goldens are recorded, and Bazel builds its op
library for the installed TensorFlow and runs the ops' tests, the cross-op
tests and lint there, then the smoke with the XLA library (jit), loads
the generated package beside this one, and, where nvcc is installed,
compiles an op's GPU kernels and GPU check runner. So neither the machinery
nor the op template can drift from what a new repository needs.

Bazel runs inside this test (it keeps its output under TEST_TMPDIR), so the
test is tagged `local` and reads the source tree through its own runfile. It
runs with the PATH of the outer build's actions and the outer build's disk
cache, so that a second run reuses the first's outputs.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import time
import unittest

_SOURCE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, _SOURCE)

from tools import machinery  # noqa: E402

_PACKAGE = "acme_probe"
_PREFIX = "AcmeProbe"
_OPS = ("scale", "scaffold_probe")

# The generated repository's tests of its ops and the cross-op tests.
_TESTS = f"//{_PACKAGE}/python/kernel_tests"
_TARGETS = [
    f"{_TESTS}/{op}:{op}_{kind}_test" for op in _OPS for kind in ("op", "onnx")
] + [
    f"{_TESTS}/onnx:onnx_coverage_test",
    f"{_TESTS}/loading:api_test",
    f"{_TESTS}/loading:smoke_test",
    f"{_TESTS}/loading:custom_op_library_test",
    f"{_TESTS}/loading:load_library_test",
    f"{_TESTS}/properties:op_registry_test",
    f"{_TESTS}/properties:large_shapes_test",
    f"{_TESTS}/properties:cpp_gradients_test",
    f"{_TESTS}/properties:determinism_test",
    "//tools/fuzz:fuzz_test",
    f"//{_PACKAGE}/core/ops/compat:all",
    "//tools/gpu_check:make_cases_test",
]


# With the XLA library loaded: every op under jit, in the smoke and against
# eager.
_XLA_TARGETS = [f"{_TESTS}/loading:smoke_test", f"{_TESTS}/properties:xla_test"]


def _action_path():
    """The PATH of the outer build's actions (tools:action_path); the one
    this test sees may differ (pyenv's shims prepend to it)."""
    with open(os.path.join(os.path.dirname(__file__), "action_path.txt")) as f:
        return f.read().strip()


class GeneratedRepoTest(unittest.TestCase):
    def setUp(self):
        self.repo = os.path.join(os.environ["TEST_TMPDIR"], "acme")
        self.env = dict(
            os.environ,
            PATH=_action_path(),
            GIT_AUTHOR_NAME="generated_repo_test",
            GIT_AUTHOR_EMAIL="generated_repo_test@example.com",
            GIT_COMMITTER_NAME="generated_repo_test",
            GIT_COMMITTER_EMAIL="generated_repo_test@example.com",
        )
        # The outer build's disk cache, not the generated .bazelrc's own.
        with open(os.path.join(_SOURCE, ".bazelrc")) as f:
            self.cache = next(
                line.split()[1] for line in f if line.startswith("build --disk_cache=")
            )

    def tearDown(self):
        subprocess.run(["bazel", "shutdown"], cwd=self.repo, env=self.env, check=False)

    def _run(self, *command, cwd=None):
        start = time.monotonic()
        result = subprocess.run(
            command,
            cwd=cwd or self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"{' '.join(command)}: {time.monotonic() - start:.0f} s", flush=True)
        self.assertEqual(
            result.returncode,
            0,
            f"{' '.join(command)}:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}",
        )
        return result.stdout

    def _bazel(self, command, *args):
        return self._run("bazel", command, self.cache, "--config=noxla", *args)

    def _record_compat(self):
        # What new_op.py runs, without the XLA library (minutes to compile).
        for target in ("update_ops_history", "record_goldens"):
            self._bazel("run", f"//{_PACKAGE}/core/ops/compat:{target}")

    def _digests(self):
        """Path -> sha256 of every file of the repository that git does not
        ignore (tools' caches, Bazel's outputs)."""
        listed = self._run("git", "ls-files", "-co", "--exclude-standard", "-z")
        digests = {}
        for path in filter(None, listed.split("\0")):
            with open(os.path.join(self.repo, path), "rb") as f:
                digests[path] = hashlib.sha256(f.read()).hexdigest()
        return digests

    def test_generated_repo_builds_and_passes(self):
        self._run(
            sys.executable,
            "tools/new_repo.py",
            self.repo,
            "--package",
            _PACKAGE,
            "--op",
            _OPS[0],
            "--skip-compat",
            cwd=_SOURCE,
        )
        self._run(sys.executable, "tools/configure.py")
        self._record_compat()
        self._run("git", "add", "-A")
        self._run("git", "commit", "-qm", "history")

        before = self._digests()
        written = self._run(sys.executable, "tools/new_op.py", _OPS[1], "--skip-compat")
        self._record_compat()
        tests = f"{_PACKAGE}/python/kernel_tests"
        self.assertIn(f"wrote {tests}/{_OPS[1]}/BUILD\n", written)
        self.assertIn(
            f"wrote {_PACKAGE}/core/kernels/{_OPS[1]}/{_OPS[1]}_op.cc", written
        )
        # The op's files are its own: of the existing files, only the two
        # tables change, recording its history and goldens included.
        changed = sorted(
            line.split()[1]
            for line in written.splitlines()
            if line.startswith("changed ")
        )
        self.assertEqual(changed, [f"{_PACKAGE}/__init__.py", f"{_PACKAGE}/ops.bzl"])
        after = self._digests()
        self.assertEqual(
            sorted(path for path, digest in before.items() if after[path] != digest),
            changed,
        )
        history = (
            f"{_PACKAGE}/core/ops/compat/ops_history_v1/{_PREFIX}_ScaffoldProbe.pbtxt"
        )
        self.assertIn(history, after)

        self._bazel("test", *_TARGETS)
        # With the XLA library.
        self._run("bazel", "test", self.cache, *_XLA_TARGETS)
        self._run("tools/lint.sh")
        self._coexist()
        if shutil.which("nvcc"):
            # Both ops are the template's: one op's GPU kernels prove it.
            self._run(
                "bazel",
                "build",
                self.cache,
                "--config=cuda",
                f"//{_PACKAGE}/core/kernels/{_OPS[1]}:{_OPS[1]}_op_core",
                f"//tools/gpu_check:gpu_check_runners_{_OPS[1]}_o",
            )

    def _coexist(self):
        """This repository's package and the generated one load and run in
        one process, each on its own portable kernels."""
        # This test's runfiles hold this repository's package (data); a test's
        # of the generated repository, its package, in its workspace's folder.
        ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        generated = os.path.join(
            self.repo,
            f"bazel-bin/{_PACKAGE}/python/kernel_tests/loading/api_test.runfiles",
            machinery.substitute(os.path.basename(ours), _PACKAGE, _PREFIX),
        )
        script = (
            "import re, numpy as np\n"
            f"from {machinery.PACKAGE}.python import registry\n"
            f"import {_PACKAGE} as theirs\n"
            "registry.run_a_case()\n"
            f"np.testing.assert_array_equal(theirs.{_OPS[0]}([1.0, 2.0], alpha=3.0),"
            " [3.0, 6.0])\n"
            "maps = open('/proc/self/maps').read()\n"
            "print(sorted(set(re.findall(r'_\\w+_portable_kernels.so', maps))))\n"
        )
        env = dict(self.env, PYTHONPATH=os.pathsep.join([ours, generated]))
        result = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            cwd=os.environ["TEST_TMPDIR"],
        )
        self.assertEqual(result.returncode, 0, result.stderr[-4000:])
        self.assertEqual(
            result.stdout.strip().splitlines()[-1],
            str(
                sorted(
                    f"_{p}_portable_kernels.so" for p in (_PACKAGE, machinery.PACKAGE)
                )
            ),
        )


if __name__ == "__main__":
    unittest.main()
