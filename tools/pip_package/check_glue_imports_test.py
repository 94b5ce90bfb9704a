"""check_glue_imports.py refuses a glue that imports a symbol its TensorFlow
does not export, and lets through the C library's and the portable kernels'."""

import gzip
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import check_glue_imports  # noqa: E402


class CheckGlueImportsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        source = os.path.join(cls.tmp, "glue.c")
        with open(source, "w") as f:
            f.write(
                "#include <string.h>\n"
                "void _ZN10tensorflow6Status2OKEv(void);\n"
                "void TfcoFoo(void);\n"
                "size_t glue(const char* s) {\n"
                "  _ZN10tensorflow6Status2OKEv(); TfcoFoo(); return strlen(s);\n"
                "}\n"
            )
        cls.glue = os.path.join(cls.tmp, "glue.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", cls.glue, source], check=True)

    def _symbols(self, names):
        path = os.path.join(self.tmp, f"{len(names)}.symbols.gz")
        with gzip.open(path, "wt") as f:
            f.write("\n".join(names) + "\n")
        return path

    def test_a_symbol_the_release_lacks_is_named(self):
        exports = check_glue_imports.exported_names(self._symbols(["other"]))
        self.assertEqual(
            check_glue_imports.missing_imports(self.glue, exports),
            ["_ZN10tensorflow6Status2OKEv"],
        )
        out = os.path.join(self.tmp, "refused.so")
        result = subprocess.run(
            [
                sys.executable,
                check_glue_imports.__file__,
                self.glue,
                out,
                self._symbols(["other"]),
            ],
            capture_output=True,
            text=True,
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("imports 1 symbols that its TensorFlow", result.stderr)
        self.assertIn("tensorflow::Status::OK()", result.stderr)
        self.assertFalse(os.path.exists(out))

    def test_exported_symbols_pass_and_the_glue_is_copied(self):
        exports = self._symbols(["_ZN10tensorflow6Status2OKEv", "more"])
        out = os.path.join(self.tmp, "accepted.so")
        subprocess.run(
            [sys.executable, check_glue_imports.__file__, self.glue, out, exports],
            check=True,
        )
        with open(self.glue, "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_names_are_read_from_a_library_too(self):
        # The installed TensorFlow's glue is checked against its libraries.
        self.assertIn("glue", check_glue_imports.exported_names(self.glue))


if __name__ == "__main__":
    unittest.main()
