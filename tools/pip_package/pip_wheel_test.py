"""End-to-end test of the wheel: build it with build_pip_pkg, install it into a
new virtualenv without network, and use it from outside the source tree."""

import ast
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

import tensorflow as tf

# The folder of the installed TensorFlow's op libraries in the wheel.
_GLUE = "tf" + "_".join(tf.__version__.split(".")[:2])
_OPS = "tensorflow_customops/python/ops/"
# The source tree build_pip_pkg packages (its runfiles).
_SOURCE = os.path.join(os.environ.get("TEST_SRCDIR", ""), "org_tensorflow_customops")


def _clean_env():
    # Bazel's Python stub points PYTHONPATH at the runfiles; the installed
    # wheel must be found on its own.
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


class PipWheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        builder = os.path.join(
            os.environ["TEST_SRCDIR"], "org_tensorflow_customops", "build_pip_pkg"
        )
        built = subprocess.run(
            [builder, os.path.join(tmp, "dist")],
            check=True,
            capture_output=True,
            text=True,
        )
        cls.wheel = built.stdout.strip().splitlines()[-1]
        with zipfile.ZipFile(cls.wheel) as whl:
            info = whl.read("tensorflow_customops/python/platform/build_info.py")
        # Whether the wheel was built with its XLA library (not --config=noxla).
        cls.xla = b"XLA = True" in info
        venv = os.path.join(tmp, "venv")
        # TensorFlow itself comes from the system site-packages.
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", venv], check=True
        )
        cls.python = os.path.join(venv, "bin", "python")
        subprocess.run(
            [cls.python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
            + ["--no-cache-dir", cls.wheel],
            check=True,
            env=_clean_env(),
        )
        cls.site_packages = subprocess.run(
            [
                cls.python,
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        cls.elsewhere = os.path.join(tmp, "elsewhere")
        os.makedirs(cls.elsewhere)

    def run_installed(self, code, check=True):
        env = _clean_env()
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        return subprocess.run(
            [self.python, "-c", code],
            cwd=self.elsewhere,
            env=env,
            capture_output=True,
            text=True,
            check=check,
        )

    def test_op_library_from_outside_the_source_tree(self):
        # The smoke (test_wheel_smoke) runs the ops.
        out = self.run_installed(
            "import tensorflow_customops as tfco;"
            "from tensorflow_customops.python.ops import load_library;"
            "print(tfco.__file__);"
            "print(load_library.library_path());"
            "print(len(load_library.op_list().op))"
        ).stdout.splitlines()
        self.assertEqual(len(out), 3, out)
        self.assertTrue(out[0].startswith(self.site_packages), out)
        self.assertTrue(out[1].startswith(self.site_packages), out)
        self.assertGreater(int(out[2]), 0)

    def test_wheel_smoke(self):
        # The smoke ships in the wheel, so an installed copy checks itself.
        result = subprocess.run(
            [self.python, "-m", "tensorflow_customops.smoke"],
            cwd=self.elsewhere,
            env=dict(_clean_env(), TF_CPP_MIN_LOG_LEVEL="2"),
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(
            f"from {self.site_packages}/tensorflow_customops\n", result.stdout
        )
        # Nothing skipped: set-up installs what every check needs, the onnx
        # extra's packages included.
        self.assertNotIn("\nSKIPPED ", result.stdout)
        if self.xla:
            self.assertNotIn("no XLA lowerings", result.stdout)
        # Every family's checks, at least one each, ran and passed.
        passed = re.search(r"\n(\d+) passed, 0 failed\n", result.stdout)
        self.assertTrue(passed, result.stdout)
        self.assertEqual(int(passed.group(1)), result.stdout.count("\nPASSED "))
        with zipfile.ZipFile(self.wheel) as whl:
            families = [n for n in whl.namelist() if n.endswith("_smoke.py")]
        self.assertTrue(families)
        self.assertGreaterEqual(int(passed.group(1)), len(families))

    def test_build_info_of_installed_package(self):
        out = self.run_installed(
            "import tensorflow_customops as tfco; print(tfco.build_info())"
        ).stdout
        self.assertIn(f"'tf_running_version': '{tf.__version__}'", out)
        self.assertIn(f"'tf_version': '{tf.__version__}'", out)
        self.assertIn("'cxx11_abi_flag':", out)
        if self.xla:
            self.assertIn("'xla': True", out)

    def test_installed_package_loads_its_xla_lowerings(self):
        # The families' smoke checks compile their ops (test_wheel_smoke).
        if not self.xla:
            self.skipTest("built with --config=noxla")
        out = self.run_installed(
            "from tensorflow_customops.python.ops import load_library;"
            "print(load_library.xla_status())"
        ).stdout
        self.assertIn("(True, '')", out)

    def test_other_tensorflow_release_is_refused_with_a_clear_error(self):
        result = self.run_installed(
            "import tensorflow as tf; tf.__version__ = '2.99.0';"
            "import tensorflow_customops",
            check=False,
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("TensorFlow 2.99.0 is installed", result.stderr)
        minor = ".".join(tf.__version__.split(".")[:2])
        self.assertRegex(
            result.stderr, rf"has op libraries for TensorFlow [0-9., ]*{minor}"
        )
        self.assertIn("tools/build_wheel.sh --installed-only", result.stderr)

    def test_system_library_floor(self):
        # The floor is set by what the libraries import: GLIBCXX_3.4.21 (gcc
        # 5's C++11-ABI std::string, which TensorFlow's ABI flag requires;
        # newer versions gcc 12's headers bring are redirected by
        # core/platform/libstdcxx_compat.cc) and glibc 2.17 (the CUDA
        # runtime's calls are rebound by tools/glibc_compat.py).
        floors = {"GLIBC": (2, 17), "GLIBCXX": (3, 4, 21), "CXXABI": (1, 3, 9)}
        ops = os.path.join(self.site_packages, _OPS)
        libraries = [
            os.path.join(folder, name)
            for folder, _, names in os.walk(ops)
            for name in names
            if name.endswith(".so")
        ]
        self.assertGreaterEqual(len(libraries), 2)
        for library in libraries:
            symbols = subprocess.run(
                ["objdump", "-T", library], check=True, capture_output=True, text=True
            ).stdout
            for family, version in re.findall(
                r"\b(GLIBC|GLIBCXX|CXXABI)_([0-9.]+)", symbols
            ):
                self.assertLessEqual(
                    tuple(int(v) for v in version.split(".")),
                    floors[family],
                    f"{library} needs {family}_{version}",
                )

    def test_wheel_tags(self):
        # One wheel for every Python 3: the libraries link no libpython.
        name = os.path.basename(self.wheel)
        self.assertTrue(name.startswith("tensorflow_customops-"), name)
        self.assertIn("-py3-none-", name)
        self.assertRegex(name, r"-(manylinux_\d+_\d+|linux)_x86_64\.whl$")

    def test_requires_no_tensorflow_distribution(self):
        # pip must never replace the installed TensorFlow (another release,
        # tensorflow-cpu, a build of one's own); the loader checks it instead.
        with zipfile.ZipFile(self.wheel) as whl:
            metadata = next(
                whl.read(n).decode() for n in whl.namelist() if n.endswith("/METADATA")
            )
        requires = [
            line.split(":", 1)[1].strip()
            for line in metadata.splitlines()
            if line.startswith("Requires-Dist:")
        ]
        # Only the onnx extra's packages, for tfco.onnx, as the package pins
        # them.
        with zipfile.ZipFile(self.wheel) as whl:
            pins = {}
            exec(whl.read("tensorflow_customops/python/onnx/requirements.py"), pins)
        self.assertIn("Provides-Extra: onnx", metadata)
        self.assertEqual(
            sorted(r.split(";")[0].strip() for r in requires),
            sorted(pins["REQUIREMENTS"]),
        )
        for requirement in requires:
            self.assertRegex(requirement, r"; extra == .onnx.$")
        self.assertIn("Requires-Python: >=3.9", metadata)

    def test_description_reads_on_a_package_index(self):
        # Off the repository a relative link (docs/<page>.md, #section) is
        # dead: it reads as its text and the page's path.
        with zipfile.ZipFile(self.wheel) as whl:
            metadata = next(
                whl.read(n).decode() for n in whl.namelist() if n.endswith("/METADATA")
            )
        # The summary: the package docstring's first paragraph.
        with open(os.path.join(_SOURCE, "tensorflow_customops", "__init__.py")) as f:
            docstring = " ".join(ast.get_docstring(ast.parse(f.read())).split())
        summary = re.search(r"\nSummary: (.+)\n", metadata)
        self.assertTrue(summary, metadata[:1000])
        self.assertIn(summary.group(1), docstring)
        self.assertIn("Description-Content-Type: text/markdown", metadata)
        self.assertIn("pip install tensorflow_customops", metadata)
        with open(os.path.join(_SOURCE, "README.md")) as f:
            links = re.findall(r"\[([^\]]+)\]\((?!https?://)([^)#]+)\)", f.read())
        for text, path in links:
            if text != path:
                self.assertIn(f"{text} (`{path}`)", metadata)
        self.assertEqual(re.findall(r"\]\((?!https?://)[^)]*\)", metadata), [])

    def test_wheel_holds_the_package_only(self):
        with zipfile.ZipFile(self.wheel) as whl:
            names = whl.namelist()
        self.assertIn(f"{_OPS}{_GLUE}/_custom_ops.so", names)
        self.assertIn(f"{_OPS}_tensorflow_customops_portable_kernels.so", names)
        if self.xla:
            self.assertIn(f"{_OPS}{_GLUE}/_custom_ops_xla.so", names)
        # The portable kernels are the only library outside a release's folder.
        self.assertEqual(
            [n for n in names if n.endswith(".so") and n.count("/") == 3],
            [f"{_OPS}_tensorflow_customops_portable_kernels.so"],
        )
        self.assertIn("tensorflow_customops/python/platform/build_info.py", names)
        self.assertIn("tensorflow_customops/smoke.py", names)
        self.assertIn("tensorflow_customops/onnx.py", names)
        # Every module of the package, the families' included.
        source = os.path.join(_SOURCE, "tensorflow_customops")
        modules = [
            os.path.relpath(os.path.join(folder, name), _SOURCE)
            for folder, _, files in os.walk(source)
            if "kernel_tests" not in folder
            for name in files
            if name.endswith(".py")
        ]
        self.assertIn("tensorflow_customops/python/onnx/handlers/__init__.py", modules)
        self.assertEqual([m for m in modules if m not in names], [])
        for name in names:
            self.assertTrue(
                name.startswith(("tensorflow_customops/", "tensorflow_customops-")),
                name,
            )
            self.assertNotIn("kernel_tests", name)
            self.assertFalse(name.endswith(("BUILD", "_test.py", ".bzl")), name)
        # auditwheel must not have vendored TensorFlow's own libraries.
        self.assertFalse([n for n in names if "libtensorflow_" in n])

    def test_libraries_have_no_build_tree_paths(self):
        # The op library needs TensorFlow's framework library only; the XLA
        # library also needs libtensorflow_cc, which holds XLA's op registry.
        libraries = {
            f"{_GLUE}/_custom_ops.so": [
                "libtensorflow_framework.so.2",
                "_tensorflow_customops_portable_kernels.so",
            ],
            "_tensorflow_customops_portable_kernels.so": [],
        }
        if self.xla:
            libraries[f"{_GLUE}/_custom_ops_xla.so"] = [
                "libtensorflow_framework.so.2",
                "libtensorflow_cc.so.2",
            ]
        for name, needed in libraries.items():
            library = os.path.join(self.site_packages, _OPS, name)
            dynamic = subprocess.run(
                ["readelf", "--dynamic", library],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            for dependency in needed:
                self.assertIn(dependency, dynamic, name)
            # What makes the py3-none tag true.
            self.assertNotIn("libpython", dynamic, name)
            if not name.endswith("_custom_ops_xla.so"):
                self.assertNotIn("libtensorflow_cc", dynamic)
            if name == "_tensorflow_customops_portable_kernels.so":
                self.assertNotIn("libtensorflow", dynamic)
            for line in dynamic.splitlines():
                if "RPATH" in line or "RUNPATH" in line:
                    self.assertNotIn("bazel", line)
                    self.assertNotIn("_solib", line)


if __name__ == "__main__":
    unittest.main()
