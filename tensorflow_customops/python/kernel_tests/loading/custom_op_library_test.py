"""Properties of the built libraries that users depend on at install time:
the op library (the glue, built for one TensorFlow) finds the portable kernels
beside it, the portable kernels need no TensorFlow library and export their C
interface only, nothing points into the build tree, the CUDA runtime (under
--config=cuda) is inside the portable kernels and private, and GPU code is present
exactly when build_info() says so."""

import os
import subprocess

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library

# The portable kernels serve every release's op library, from the folder above
# theirs (in a wheel) or beside the one a Bazel build makes.
_CORE = os.path.join(
    os.path.dirname(load_library.__file__), load_library.PORTABLE_LIBRARY_NAME
)


def _readelf(path, *args):
    return subprocess.run(
        ["readelf", "--wide", *args, path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _needed(path):
    return [
        line.split("[", 1)[1].rstrip("]")
        for line in _readelf(path, "--dynamic").splitlines()
        if "(NEEDED)" in line
    ]


def _exported(path):
    """The symbols `path` defines for other objects to use."""
    return [
        line.split()[-1].split("@")[0]
        for line in _readelf(path, "--dyn-syms").splitlines()
        if (" GLOBAL " in line or " WEAK " in line)
        and " DEFAULT " in line
        and " UND " not in line
    ]


class CustomOpLibraryTest(tf.test.TestCase):
    def test_op_library_needs_tensorflow_and_the_core(self):
        needed = _needed(load_library.library_path())
        self.assertIn("libtensorflow_framework.so.2", needed)
        self.assertIn(load_library.PORTABLE_LIBRARY_NAME, needed)
        runpath = [
            line.split("[", 1)[1].rstrip("]")
            for line in _readelf(load_library.library_path(), "--dynamic").splitlines()
            if "RUNPATH" in line or "RPATH" in line
        ]
        self.assertEqual(runpath, ["$ORIGIN:$ORIGIN/.."])

    def test_core_needs_no_tensorflow_and_no_cuda_runtime(self):
        for lib in _needed(_CORE):
            self.assertFalse(lib.startswith(("libtensorflow", "libcudart")), lib)
        for line in _readelf(_CORE, "--dynamic").splitlines():
            self.assertNotIn("RPATH", line)
            self.assertNotIn("RUNPATH", line)

    def test_core_exports_its_c_interface_only(self):
        exported = _exported(_CORE)
        self.assertIn("TfcoGetGpuSupport", exported)
        self.assertEqual([s for s in exported if not s.startswith("Tfco")], [])

    def test_op_library_holds_no_kernel_or_cuda_code(self):
        self.assertNotIn(".nv_fatbin", _readelf(load_library.library_path(), "-S"))
        exported = _exported(load_library.library_path())
        self.assertFalse([s for s in exported if s.startswith(("cuda", "__cuda"))])
        # The kernels are the core's: the op library calls them.
        self.assertFalse(set(exported) & set(_exported(_CORE)))

    def test_gpu_code_present_exactly_when_built_with_cuda(self):
        sections = _readelf(_CORE, "--section-headers")
        self.assertEqual(".nv_fatbin" in sections, tfco.build_info()["cuda"])

    def test_libraries_are_next_to_their_loader(self):
        here = os.path.dirname(os.path.abspath(load_library.__file__))
        self.assertEqual(os.path.dirname(load_library.library_path()), here)
        self.assertTrue(os.path.exists(_CORE))


if __name__ == "__main__":
    tf.test.main()
