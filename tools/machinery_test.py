"""The machinery boundary (tools/machinery.py) holds: every pattern names
files that exist, the machinery names no op family and no other part of this
library, and the substitution and op prefix check behave as new repositories
need. In a repository made by
tools/new_repo.py only the latter run: the boundary is held where its
machinery comes from.

It reads the source tree through its own runfile (tagged `local`)."""

import os
import re
import sys
import unittest

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, _ROOT)

from tools import machinery  # noqa: E402


def _content_pattern(files):
    """A regex that finds, by path or module name, this repository's files
    under the package that are neither machinery nor named by a family (its
    Keras layers, benchmarks, ...), and the folders that hold only such."""
    package = machinery.PACKAGE + "/"
    machinery_set = set(files)
    # The history and goldens' folders are every repository's.
    history = machinery._expand(machinery.FAMILY_PARTS, machinery.PACKAGE)
    content = [
        p[len(package) :]
        for p in machinery.tracked_files(_ROOT)
        if p.startswith(package)
        and p not in machinery_set
        and not machinery._matches(p, history)
    ]
    machinery_dirs = {os.path.dirname(p[len(package) :]) for p in files}
    names = {os.path.splitext(p)[0] for p in content if p.endswith(".py")}
    names |= {
        os.path.dirname(p)
        for p in content
        if os.path.dirname(p) not in machinery_dirs
        and not any(d.startswith(os.path.dirname(p) + "/") for d in machinery_dirs)
    }
    names.discard("")
    forms = {n for name in names for n in (name, name.replace("/", "."))}
    return re.compile(
        "|".join(rf"(?<![\w]){re.escape(n)}(?![\w])" for n in sorted(forms))
    )


def _read(path):
    with open(os.path.join(_ROOT, path), errors="replace") as f:
        return f.read()


@unittest.skipIf(
    os.path.exists(os.path.join(_ROOT, machinery.STAMP)),
    "a repository made by tools/new_repo.py: its machinery is held where it comes from",
)
class MachineryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = machinery.machinery_files(_ROOT)
        cls.tracked = machinery.tracked_files(_ROOT)
        cls.content = _content_pattern(cls.files)
        cls.content_files = [
            p
            for p in cls.tracked
            if p not in set(cls.files)
            and p.startswith(machinery.PACKAGE + "/")
            and not p.endswith("/BUILD")
        ]

    def test_every_pattern_names_files(self):
        package = machinery.PACKAGE
        for pattern in machinery.MACHINERY + machinery.TABLES + machinery.FAMILY_PARTS:
            pattern = pattern.replace("{package}", package)
            if "{family}" in pattern:
                pattern = pattern.replace("{family}", "*")
            with self.subTest(pattern=pattern):
                self.assertTrue(
                    any(machinery._matches(p, [pattern]) for p in self.tracked),
                    f"{pattern} matches no file: update tools/machinery.py",
                )

    def test_tables_are_machinery(self):
        for path in machinery.tables():
            self.assertIn(path, self.files)

    def test_the_machinery_names_none_of_this_librarys_parts(self):
        registered = os.path.join(
            _ROOT, machinery.PACKAGE, "core/ops/compat/registered_ops"
        )
        ops = [
            name[len(machinery.OP_PREFIX) + 1 : -len(".pbtxt")]
            for name in os.listdir(registered)
            if name.startswith(machinery.OP_PREFIX + "_")
        ]
        self.assertTrue(ops)
        pattern = machinery.family_pattern(machinery.families(_ROOT), set(ops))
        tables = set(machinery.tables())
        found = [
            p
            for p in self.files
            if p not in tables
            and (
                pattern.search(_read(p))
                or self.content.search(_read(p))
                or self._builds_content(p)
            )
        ]
        self.assertEqual(
            sorted(found),
            [],
            "machinery files name an op family or another part of this "
            "library: make that part come from the family (CONTRIBUTING.md, "
            '"The machinery and the families")',
        )

    def _builds_content(self, path):
        """Whether `path`, a BUILD file, names a file of its folder that is
        not machinery."""
        if os.path.basename(path) != "BUILD":
            return False
        folder = os.path.dirname(path) + "/"
        text = _read(path)
        stems = [
            os.path.splitext(p[len(folder) :])[0]
            for p in self.content_files
            if p.startswith(folder) and "/" not in p[len(folder) :]
        ]
        return any(re.search(rf'"{re.escape(s)}(\.py)?"', text) for s in stems)

    def test_family_parts_are_not_machinery(self):
        for family in machinery.families(_ROOT):
            for path in self.files:
                self.assertNotIn(f"/kernels/{family}/", path)
                self.assertFalse(path.endswith(f"cases/{family}.py"), path)
        self.assertFalse([p for p in self.files if "ops_history_v1" in p])


class NamesTest(unittest.TestCase):
    def test_substitute(self):
        cases = {
            'load("//tensorflow_customops:tensorflow_customops.bzl")': (
                'load("//acme_ops:acme_ops.bzl")'
            ),
            "#ifndef TENSORFLOW_CUSTOMOPS_CORE_API_H_": "#ifndef ACME_OPS_CORE_API_H_",
            "pip install tensorflow-customops[onnx]": "pip install acme-ops[onnx]",
            'REGISTER_OP("CustomOps>Foo")': 'REGISTER_OP("Acme>Foo")',
            "ops_history_v1/CustomOps_Foo.pbtxt": "ops_history_v1/Acme_Foo.pbtxt",
            "lib.custom_ops_foo(x)": "lib.acme_foo(x)",
            # The machinery's own identifiers stay.
            "TfcoError TfcoFoo(); tfco_py_test(); TFCO_OPS": (
                "TfcoError TfcoFoo(); tfco_py_test(); TFCO_OPS"
            ),
            "_custom_ops_xla.so": "_custom_ops_xla.so",
        }
        for text, expected in cases.items():
            self.assertEqual(machinery.substitute(text, "acme_ops", "Acme"), expected)

    def test_function_prefix(self):
        # As TensorFlow names a loaded library's functions (the cases read
        # the same after substitution, in a generated repository).
        cases = {
            "CustomOps>Foo": "lib.custom_ops_foo",
            "XyzWidget>Foo": "lib.xyz_widget_foo",
            "Xyz>Vision>Foo": "lib.xyz_vision_foo",
            "XYZOps>Foo": "lib.xyz_ops_foo",
            "X_1>Foo": "lib.x_1_foo",
        }
        for op, expected in cases.items():
            prefix = op[: -len(">Foo")]
            self.assertEqual(
                "lib." + machinery.function_prefix(prefix) + "foo", expected
            )

    def test_op_prefix(self):
        for prefix in ("Acme", "Acme>Vision", "A_1"):
            machinery.check_op_prefix(prefix)
        for prefix in ("", "acme", "Acme>", ">Acme", "Ac-me", "Acme>>X", "1Acme"):
            with self.subTest(prefix=prefix):
                with self.assertRaisesRegex(ValueError, "TensorFlow's op names"):
                    machinery.check_op_prefix(prefix)


if __name__ == "__main__":
    unittest.main()
