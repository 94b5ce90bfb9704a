"""Properties of the built op library that users depend on at install time:
nothing points into the build tree, the CUDA runtime (under --config=cuda) is
inside the library and private, and GPU code is present exactly when
build_info() says so."""

import os
import subprocess

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library


def _readelf(*args):
    return subprocess.run(
        ["readelf", "--wide", *args, load_library.library_path()],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


class CustomOpLibraryTest(tf.test.TestCase):
    def test_needed_libraries(self):
        needed = [
            line.split("[", 1)[1].rstrip("]")
            for line in _readelf("--dynamic").splitlines()
            if "(NEEDED)" in line
        ]
        self.assertIn("libtensorflow_framework.so.2", needed)
        for lib in needed:
            # No dynamic CUDA runtime: the static one is linked in.
            self.assertFalse(lib.startswith("libcudart"), needed)

    def test_no_rpath_into_the_build_tree(self):
        for line in _readelf("--dynamic").splitlines():
            if "RPATH" in line or "RUNPATH" in line:
                self.assertNotRegex(line, r"bazel|_solib|execroot", line)

    def test_cuda_runtime_symbols_stay_private(self):
        exported = [
            line.split()[-1]
            for line in _readelf("--dyn-syms").splitlines()
            if " DEFAULT " in line and " UND " not in line
        ]
        self.assertFalse([s for s in exported if s.startswith(("cuda", "__cuda"))])

    def test_gpu_code_present_exactly_when_built_with_cuda(self):
        sections = _readelf("--section-headers")
        self.assertEqual(".nv_fatbin" in sections, tfco.build_info()["cuda"])

    def test_library_is_next_to_its_loader(self):
        self.assertEqual(
            os.path.dirname(load_library.library_path()),
            os.path.dirname(os.path.abspath(load_library.__file__)),
        )


if __name__ == "__main__":
    tf.test.main()
