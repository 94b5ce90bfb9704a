"""tools/new_op.py writes an op that builds and passes every test that reads
the op registry: the template is generated into a scratch copy of the
repository, its spec history and goldens are recorded, and Bazel builds the
library there and runs the new op's tests, the cross-op tests and lint, and
compiles its XLA lowering. So the template cannot drift from the repository.
Where nvcc is installed, its GPU kernel and GPU check runner are compiled too.

Bazel runs inside this test (it keeps its output under TEST_TMPDIR), so the
test is tagged `local` and reads the source tree through its own runfile. It
runs with the PATH of the outer build's actions, so the outputs that do not
depend on the new op come from the disk cache (.bazelrc) that build filled.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import time
import unittest

_NAME = "scaffold_probe"
_TARGETS = [
    f"//tensorflow_customops/python/kernel_tests/{_NAME}:{_NAME}_op_test",
    f"//tensorflow_customops/python/kernel_tests/{_NAME}:{_NAME}_onnx_test",
    "//tensorflow_customops/python/kernel_tests/onnx:onnx_coverage_test",
    "//tensorflow_customops/python/kernel_tests/loading:api_test",
    "//tensorflow_customops/python/kernel_tests/loading:smoke_test",
    "//tensorflow_customops/python/kernel_tests/properties:op_registry_test",
    "//tensorflow_customops/python/kernel_tests/properties:large_shapes_test",
    "//tensorflow_customops/python/kernel_tests/properties:cpp_gradients_test",
    "//tensorflow_customops/python/kernel_tests/properties:determinism_test",
    "//tools/fuzz:fuzz_test",
    "//tensorflow_customops/core/ops/compat:all",
    "//tools/gpu_check:make_cases_test",
]


def _source_tree():
    """The repository this test's file comes from (runfiles are symlinks)."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _action_path():
    """The PATH of the outer build's actions (tools:action_path); the one
    this test sees may differ (pyenv's shims prepend to it)."""
    with open(os.path.join(os.path.dirname(__file__), "action_path.txt")) as f:
        return f.read().strip()


def _copy_tree(source, destination):
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=source,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for relative in filter(None, listed.split("\0")):
        path = os.path.join(source, relative)
        if os.path.isfile(path):
            target = os.path.join(destination, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)
    # Written by tools/configure.py and ignored by git.
    shutil.copy2(os.path.join(source, ".tf_configure.bazelrc"), destination)


class NewOpTest(unittest.TestCase):
    def setUp(self):
        self.repo = os.path.join(os.environ["TEST_TMPDIR"], "repo")
        _copy_tree(_source_tree(), self.repo)
        self.env = dict(os.environ, PATH=_action_path())

    def tearDown(self):
        subprocess.run(["bazel", "shutdown"], cwd=self.repo, env=self.env, check=False)

    def _run(self, *command):
        start = time.monotonic()
        result = subprocess.run(
            command,
            cwd=self.repo,
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

    def _digests(self):
        """Path (relative) -> sha256 of every file of the scratch copy."""
        digests = {}
        for directory, _, files in os.walk(self.repo):
            for name in files:
                path = os.path.join(directory, name)
                with open(path, "rb") as f:
                    digests[os.path.relpath(path, self.repo)] = hashlib.sha256(
                        f.read()
                    ).hexdigest()
        return digests

    def test_generated_op_builds_and_passes(self):
        before = self._digests()
        written = self._run(
            sys.executable, "tools/new_op.py", _NAME, "--function", "probe"
        )
        self.assertIn(
            f"wrote tensorflow_customops/core/kernels/{_NAME}/{_NAME}_op.cc", written
        )
        # The op's files are its own (its tests, lowering and kernels in folders
        # of their own, the GPU check's runner and cases registering
        # themselves): of the existing files, only the two tables change.
        tests = "tensorflow_customops/python/kernel_tests"
        self.assertIn(f"wrote {tests}/{_NAME}/BUILD\n", written)
        changed = sorted(
            line.split()[1]
            for line in written.splitlines()
            if line.startswith("changed ")
        )
        self.assertEqual(
            changed,
            [
                "tensorflow_customops/__init__.py",
                "tensorflow_customops/ops.bzl",
            ],
        )
        with open(os.path.join(self.repo, "tensorflow_customops", "__init__.py")) as f:
            self.assertIn(f"python.ops.{_NAME}_ops import probe\n", f.read())
        self.assertIn("recorded CustomOps>ScaffoldProbe version 1", written)
        # The whole walk, recording the spec history and goldens included,
        # changes no other existing file.
        after = self._digests()
        self.assertEqual(
            sorted(path for path, digest in before.items() if after[path] != digest),
            changed,
        )
        # Without the XLA library, whose sources take minutes to compile; the
        # new op's lowering is compiled on its own.
        self._run("bazel", "test", "--config=noxla", *_TARGETS)
        self._run(
            "bazel",
            "build",
            f"//tensorflow_customops/compiler/tf2xla/kernels/{_NAME}:{_NAME}_op",
        )
        self._run("tools/lint.sh")
        if shutil.which("nvcc"):
            # The GPU kernel and the GPU check's runner, compiled by nvcc.
            self._run(
                "bazel",
                "build",
                "--config=cuda",
                f"//tensorflow_customops/core/kernels/{_NAME}:{_NAME}_op_core",
                f"//tools/gpu_check:gpu_check_runners_{_NAME}_o",
            )

    def test_existing_op_is_refused(self):
        sys.path.insert(0, self.repo)
        from tools import machinery

        family = machinery.families(self.repo)[0]
        result = subprocess.run(
            [sys.executable, "tools/new_op.py", family, "--skip-compat"],
            cwd=self.repo,
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"{family} exists already", result.stderr)

    def test_name_must_be_snake_case(self):
        result = subprocess.run(
            [sys.executable, "tools/new_op.py", "ScaleBy", "--skip-compat"],
            cwd=self.repo,
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("NAME must be snake_case, got 'ScaleBy'", result.stderr)


if __name__ == "__main__":
    unittest.main()
