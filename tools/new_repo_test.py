"""tools/new_repo.py without Bazel: what it refuses before writing anything,
that a generated repository's machinery is this repository's byte for byte
(substituted), that it holds nothing else of this library, and --update on a
generated repository with a second op. The scaffold's own refusals run in
the generated repository too.

It reads the source tree through its own runfile (tagged `local`)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, _ROOT)

from tools import doc_refs, machinery, new_repo  # noqa: E402

_PACKAGE = "acme_vision"
_PREFIX = "Acme"
_ENV = dict(
    os.environ,
    GIT_AUTHOR_NAME="t",
    GIT_AUTHOR_EMAIL="t@example.com",
    GIT_COMMITTER_NAME="t",
    GIT_COMMITTER_EMAIL="t@example.com",
)


def _run(*args, cwd=_ROOT, check=True):
    result = subprocess.run(
        args, cwd=cwd, env=_ENV, capture_output=True, text=True, check=False
    )
    if check and result.returncode:
        raise AssertionError(f"{' '.join(args)}:\n{result.stdout}\n{result.stderr}")
    return result


def _new_repo(*args, check=True):
    return _run(sys.executable, "tools/new_repo.py", *args, check=check)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _sub(text):
    return machinery.substitute(text, _PACKAGE, _PREFIX)


def _shared():
    """This repository's machinery that a new repository shares verbatim."""
    own = set(machinery.tables() + machinery.starters())
    return [p for p in machinery.machinery_files(_ROOT) if p not in own]


class NewRepoTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.dest = os.path.join(cls.tmp, "acme")
        start = time.monotonic()
        cls.output = _new_repo(
            cls.dest, "--package", _PACKAGE, "--op-prefix", _PREFIX, "--skip-compat"
        ).stdout
        print(f"new_repo.py --skip-compat: {time.monotonic() - start:.1f} s")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def _copy(self, name):
        copy = os.path.join(self.tmp, name)
        shutil.copytree(self.dest, copy, symlinks=True)
        return copy

    def assert_machinery_is_ours(self, dest):
        with tempfile.TemporaryDirectory() as rendered:
            new_repo.render(rendered, _PACKAGE, _PREFIX)
            for path in _shared():
                with self.subTest(path=path):
                    self.assert_file_is_ours(dest, rendered, path)

    def assert_file_is_ours(self, dest, rendered, path):
        target = os.path.join(dest, _sub(path))
        data = _read(target)
        self.assertEqual(data, _read(os.path.join(rendered, _sub(path))))
        substituted = _sub(_read(os.path.join(_ROOT, path)).decode())
        if data != substituted.encode():
            # A source file that the names' lengths or sort order made the
            # formatters change (render's, which lint.sh in the generated
            # repository checks): never another kind of file.
            self.assertTrue(path.endswith((".py", ".cc", ".h")), path)
        self.assertEqual(
            os.stat(target).st_mode & 0o777,
            os.stat(os.path.join(_ROOT, path)).st_mode & 0o777,
        )

    def test_machinery_is_byte_identical(self):
        self.assert_machinery_is_ours(self.dest)

    def test_tables_hold_the_example_op_only(self):
        self.assertEqual(machinery.families(self.dest, _PACKAGE), ["scale"])
        init = _read(os.path.join(self.dest, _PACKAGE, "__init__.py")).decode()
        self.assertIn(f"from {_PACKAGE}.python.ops.scale_ops import scale\n", init)
        self.assertTrue(init.startswith(f'"""{_PACKAGE}: TensorFlow custom ops'))
        # The machinery's names, and the example op's.
        self.assertIn(
            "__all__ = [\n"
            '    "build_info",\n'
            '    "cpp_gradient",\n'
            '    "onnx",\n'
            '    "scale",\n'
            '    "__version__",\n'
            "]\n",
            init,
        )
        ops_bzl = _read(os.path.join(self.dest, _PACKAGE, "ops.bzl")).decode()
        ours = _sub(_read(os.path.join(_ROOT, machinery.tables()[0])).decode())
        self.assertEqual(
            new_repo.empty_ops_table(ops_bzl), new_repo.empty_ops_table(ours)
        )
        self.assertIn("TFCO_SHAPE_DEPS = {}\n", ops_bzl)
        version = _read(os.path.join(self.dest, _PACKAGE, "version.py")).decode()
        self.assertIn('__version__ = "0.1.0"', version)
        with open(os.path.join(self.dest, new_repo.STAMP)) as f:
            self.assertEqual(json.load(f), {"package": _PACKAGE, "op_prefix": _PREFIX})

    @unittest.skipIf(
        os.path.exists(os.path.join(_ROOT, machinery.STAMP)),
        "a repository made by tools/new_repo.py: the names of its ops are "
        "words its machinery, written for another repository, may use",
    )
    def test_nothing_else_of_this_library(self):
        registered = os.path.join(
            _ROOT, machinery.PACKAGE, "core/ops/compat/registered_ops"
        )
        ops = {
            name[len(machinery.OP_PREFIX) + 1 : -len(".pbtxt")]
            for name in os.listdir(registered)
        }
        family = machinery.family_pattern(machinery.families(_ROOT), ops)
        # Our names (not as part of an identifier: `RegisteredCustomOps`).
        ours = re.compile(
            "|".join(
                rf"(?<![A-Za-z]){re.escape(n)}(?![a-z])"
                for name in (machinery.PACKAGE, machinery.OP_PREFIX)
                for n in (name, name.upper())
            )
        )
        files = machinery.tracked_files(self.dest)
        self.assertIn("README.md", files)
        for path in files:
            text = _read(os.path.join(self.dest, path)).decode(errors="replace")
            with self.subTest(path=path):
                found = ours.search(text) or family.search(text)
                self.assertIsNone(found and found.group(0))

    def test_every_document_it_names_is_there(self):
        # The machinery's comments cite docs/ and CONTRIBUTING.md's headings;
        # the generated repository holds each (the machinery's documents, and
        # the sections its CONTRIBUTING.md takes from ours).
        self.assertEqual(doc_refs.dangling(self.dest), [])

    def test_two_commits_and_next_steps(self):
        log = _run("git", "log", "--format=%s", cwd=self.dest).stdout.splitlines()
        self.assertEqual(
            log, ["Scale, the example op", f"{_PACKAGE}: the op repository's machinery"]
        )
        self.assertEqual(_run("git", "status", "--porcelain", cwd=self.dest).stdout, "")
        self.assertIn(f"{_PACKAGE} with {_PREFIX}>Scale", self.output)
        self.assertIn("tools/test.sh", self.output)

    def test_default_prefix_is_the_package_in_camel_case(self):
        self.assertEqual(new_repo.camel_case("acme_vision_2"), "AcmeVision2")

    def test_bad_input_writes_nothing(self):
        occupied = os.path.join(self.tmp, "occupied")
        os.makedirs(occupied)
        with open(os.path.join(occupied, "notes.txt"), "w") as f:
            f.write("mine\n")
        fresh = os.path.join(self.tmp, "fresh")
        cases = [
            ((occupied, "--package", "acme"), "exists and is not an empty folder"),
            ((fresh, "--package", "Acme"), "not a Python package name"),
            ((fresh, "--package", "acme-ops"), "not a Python package name"),
            ((fresh, "--package", "1acme"), "not a Python package name"),
            ((fresh, "--package", "class"), "reserved name"),
            ((fresh, "--package", "tools"), "reserved name"),
            ((fresh, "--package", "json"), "clashes with the installed module json"),
            ((fresh, "--package", "numpy"), "clashes with the installed module numpy"),
            ((fresh, "--package", machinery.PACKAGE), "is this repository's package"),
            (
                (fresh, "--package", "acme", "--op-prefix", "acme"),
                "TensorFlow's op names",
            ),
            (
                (fresh, "--package", "acme", "--op-prefix", "Ac>"),
                "TensorFlow's op names",
            ),
            ((fresh, "--package", "acme", "--op", "Scale"), "--op must be snake_case"),
            ((fresh,), "--package is required"),
            ((fresh, "--update"), "not made by tools/new_repo.py"),
            ((self.dest, "--update", "--package", "x"), "reads the package"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                result = _new_repo(*args, check=False)
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(message, result.stderr)
                self.assertFalse(os.path.exists(fresh))
        self.assertEqual(os.listdir(occupied), ["notes.txt"])

    def test_update(self):
        dest = self._copy("updated")
        _run(sys.executable, "tools/new_op.py", "blur", "--skip-compat", cwd=dest)
        package = os.path.join(dest, _PACKAGE)
        with open(os.path.join(package, "version.py"), "w") as f:
            f.write('"""Mine."""\n\n__version__ = "0.2.0"\n')
        # Machinery as an older repository would hold it: a file changed, one
        # missing, one since removed; a table whose form has changed since.
        with open(os.path.join(dest, "tools", "test.sh"), "a") as f:
            f.write("# older\n")
        os.remove(os.path.join(dest, "tools", "lint.sh"))
        with open(os.path.join(dest, "tools", "obsolete.py"), "w") as f:
            f.write("")
        ops_bzl = os.path.join(package, "ops.bzl")
        table = _read(ops_bzl).decode()
        with open(ops_bzl, "w") as f:
            f.write(table.replace("TFCO_GPU_CASE_DEPS = {}\n", ""))
        _run("git", "add", "-A", cwd=dest)
        _run("git", "commit", "-qm", "blur", cwd=dest)
        own = {
            p: _read(os.path.join(dest, p))
            for p in machinery.tracked_files(dest)
            if "blur" in p or "scale" in p
        }
        own.update(
            (p, _read(os.path.join(dest, p)))
            for p in (_sub(p) for p in machinery.tables() + machinery.starters())
        )

        with open(os.path.join(dest, "tools", "test.sh"), "a") as f:
            f.write("# uncommitted\n")
        result = _new_repo("--update", dest, check=False)
        self.assertIn("has uncommitted changes", result.stderr)
        _run("git", "checkout", "tools/test.sh", cwd=dest)

        output = _new_repo("--update", dest).stdout
        self.assertIn("changed tools/test.sh\n", output)
        self.assertIn("added tools/lint.sh\n", output)
        self.assertIn("removed tools/obsolete.py\n", output)
        self.assertIn("1 added, 1 changed, 1 removed", output)
        self.assertIn("+TFCO_GPU_CASE_DEPS = {}", output)
        self.assert_machinery_is_ours(dest)
        self.assertFalse(os.path.exists(os.path.join(dest, "tools", "obsolete.py")))
        for path, data in own.items():
            self.assertEqual(_read(os.path.join(dest, path)), data, path)

        _run("git", "add", "-A", cwd=dest)
        _run("git", "commit", "-qm", "update", cwd=dest)
        with open(ops_bzl, "w") as f:
            f.write(table)
        _run("git", "commit", "-qam", "table", cwd=dest)
        self.assertIn("machinery is up to date", _new_repo("--update", dest).stdout)
        self.assertEqual(_run("git", "status", "--porcelain", cwd=dest).stdout, "")

    def test_scaffold_refusals(self):
        dest = self._copy("refusals")
        for name, message in (
            ("scale", "scale exists already"),
            ("ScaleBy", "NAME must be snake_case, got 'ScaleBy'"),
        ):
            with self.subTest(name=name):
                result = _run(
                    sys.executable,
                    "tools/new_op.py",
                    name,
                    "--skip-compat",
                    cwd=dest,
                    check=False,
                )
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(message, result.stderr)


if __name__ == "__main__":
    unittest.main()
