"""Tests of the package loader: clear errors for missing or mismatched libraries,
and an XLA library that does not load leaves the rest working."""

import os
import subprocess
import sys
from unittest import mock

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python import registry
from tensorflow_customops.python.ops import load_library, releases
from tensorflow_customops.python.platform import build_info


class LoadLibraryTest(tf.test.TestCase):
    def test_library_loads_once_and_registers_prefixed_ops(self):
        module = load_library.load_op_library()
        self.assertIs(module, load_library.load_op_library())
        names = [op.name for op in load_library.op_list().op]
        self.assertTrue(names)
        for name in names:
            self.assertTrue(name.startswith("CustomOps>"), name)

    def test_version_mismatch_names_the_supported_releases_and_the_fix(self):
        with self.assertRaises(load_library.LibraryLoadError) as ctx:
            load_library.check_tensorflow_version("2.11.1", ["2.12", "2.21"])
        message = str(ctx.exception)
        self.assertIn("TensorFlow 2.11.1 is installed", message)
        self.assertIn("not a supported release", message)
        self.assertIn("has op libraries for TensorFlow 2.12, 2.21.", message)
        self.assertIn("pip install 'tensorflow==2.21.*'", message)
        self.assertIn("`tools/build_wheel.sh --installed-only`", message)
        self.assertIn("keeps the installed TensorFlow", message)
        # A LibraryLoadError is an ImportError, so `import` failures look normal.
        self.assertIsInstance(ctx.exception, ImportError)

    def test_major_version_mismatch(self):
        with self.assertRaisesRegex(load_library.LibraryLoadError, "3.0.0"):
            load_library.check_tensorflow_version("3.0.0", ["2.21"])

    def test_development_builds_are_refused(self):
        # tf-nightly and source builds of a minor do not keep its ABI.
        for version in ("2.21.0-dev20260101", "2.21.0.dev0", "2.21.0-nightly"):
            with self.assertRaisesRegex(
                load_library.LibraryLoadError, "is a development build"
            ):
                load_library.check_tensorflow_version(version, ["2.21"])

    def test_patch_releases_are_compatible(self):
        load_library.check_tensorflow_version("2.21.3", ["2.21"])
        load_library.check_tensorflow_version("2.21.0rc1", ["2.21"])
        load_library.check_tensorflow_version("2.12.0", ["2.12", "2.21"])

    def test_each_release_folder_is_found_and_sorted(self):
        here = self.get_temp_dir()
        for folder in ("tf2_9", "tf2_21", "tf2_12", "tf2_13", "not_a_glue"):
            os.makedirs(os.path.join(here, folder))
            if folder != "tf2_13":
                with open(os.path.join(here, folder, "_custom_ops.so"), "w"):
                    pass
        folders = releases.glue_folders(here)
        self.assertEqual(list(folders), ["2.9", "2.12", "2.21"])
        self.assertEqual(folders["2.12"], os.path.join(here, "tf2_12"))

    def test_this_build_supports_the_installed_release(self):
        release = ".".join(tf.__version__.split(".")[:2])
        self.assertIn(release, releases.supported_releases())
        self.assertEqual(
            os.path.basename(load_library.library_path()), releases.LIBRARY_NAME
        )

    def test_missing_tensorflow_names_the_releases_to_install(self):
        with mock.patch.object(
            releases, "supported_releases", lambda: ["2.12", "2.21"]
        ):
            error = releases.missing_tensorflow_error()
        self.assertIsInstance(error, ImportError)
        self.assertEqual(error.name, "tensorflow")
        self.assertIn("needs TensorFlow, which is not installed", str(error))
        self.assertIn(
            "op libraries for, TensorFlow 2.12, 2.21: for example "
            "`pip install 'tensorflow==2.21.*'` (or tensorflow-cpu)",
            str(error),
        )

    def test_import_without_tensorflow(self):
        # A virtualenv without TensorFlow (nor Keras, NumPy...), as a fresh
        # `pip install` of the wheel makes, with the package on its path.
        venv = os.path.join(self.get_temp_dir(), "venv")
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", venv], check=True
        )
        root = os.path.dirname(os.path.dirname(tfco.__file__))
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": root}

        def run(code, path=root):
            return subprocess.run(
                [os.path.join(venv, "bin", "python"), "-c", code],
                env=dict(env, PYTHONPATH=path),
                capture_output=True,
                text=True,
                check=False,
            )

        result = run("import tensorflow_customops")
        self.assertNotEqual(result.returncode, 0)
        message = result.stderr.strip().splitlines()[-1]
        self.assertStartsWith(
            message, "ImportError: tensorflow_customops needs TensorFlow"
        )
        supported = releases.supported_releases()
        self.assertIn(f"TensorFlow {', '.join(supported)}: for example", message)
        self.assertIn(f"pip install 'tensorflow=={supported[-1]}.*'", message)
        self.assertNotIn("keras", result.stderr)
        # A TensorFlow that is there but fails to import keeps its own error.
        broken = os.path.join(self.get_temp_dir(), "broken", "tensorflow")
        os.makedirs(broken)
        with open(os.path.join(broken, "__init__.py"), "w") as f:
            f.write("import tfco_no_such_module\n")
        result = run(
            "import tensorflow_customops",
            f"{root}{os.pathsep}{os.path.dirname(broken)}",
        )
        self.assertIn(
            "ModuleNotFoundError: No module named 'tfco_no_such_module'", result.stderr
        )
        self.assertNotIn("needs TensorFlow", result.stderr)

    def test_abi_flag_mismatch(self):
        with self.assertRaisesRegex(
            load_library.LibraryLoadError,
            r"_GLIBCXX_USE_CXX11_ABI=0, tensorflow_customops with 1.*build_wheel",
        ):
            load_library.check_abi_flag(0, 1)
        load_library.check_abi_flag(1, 1)

    def test_mismatch_is_checked_before_loading(self):
        # A library built for another release must not even be dlopen()ed:
        # the folder is chosen (and the version checked) before any path.
        load_library._glue_folder.cache_clear()
        try:
            with mock.patch.object(tf, "__version__", "1.15.0"):
                with self.assertRaisesRegex(
                    load_library.LibraryLoadError, "TensorFlow 1.15.0 is installed"
                ):
                    load_library.library_path()
        finally:
            load_library._glue_folder.cache_clear()
        self.assertTrue(os.path.exists(load_library.library_path()))

    def test_missing_library(self):
        path = os.path.join(self.get_temp_dir(), "_custom_ops.so")
        with self.assertRaisesRegex(
            load_library.LibraryLoadError, r"op library is missing.*bazel build"
        ):
            load_library.load_from(path)

    def test_corrupt_library(self):
        path = os.path.join(self.get_temp_dir(), "corrupt.so")
        with open(path, "wb") as f:
            f.write(b"not an ELF file")
        with self.assertRaisesRegex(
            load_library.LibraryLoadError, r"Could not load .*corrupt\.so.*Reinstall"
        ):
            load_library.load_from(path)

    def test_xla_library_that_does_not_load_leaves_the_ops_working(self):
        path = os.path.join(self.get_temp_dir(), "corrupt_xla.so")
        with open(path, "wb") as f:
            f.write(b"not an ELF file")
        for missing_or_corrupt in (path + ".missing", path):
            with self.subTest(path=missing_or_corrupt):
                with (
                    mock.patch.object(
                        load_library,
                        "library_path",
                        lambda name, p=missing_or_corrupt: p,
                    ),
                    mock.patch.object(build_info, "XLA", True),
                ):
                    available, reason = load_library.xla_status.__wrapped__()
                self.assertFalse(available)
                self.assertIn(missing_or_corrupt, reason)
        with mock.patch.object(build_info, "XLA", False):
            available, reason = load_library.xla_status.__wrapped__()
        self.assertFalse(available)
        self.assertIn("--config=noxla", reason)
        for output in registry.run_a_case():
            self.assertTrue(np.all(np.isfinite(output)))

    def test_build_info_tells_the_running_tensorflow_from_the_builds(self):
        # A wheel built with TensorFlow 2.21 runs under 2.12 with its 2.12 glue.
        with mock.patch.object(tf, "__version__", "2.12.1"):
            info = tfco.build_info()
        self.assertEqual(info["tf_running_version"], "2.12.1")
        self.assertEqual(info["tf_version"], build_info.TF_VERSION)

    def test_build_info(self):
        info = tfco.build_info()
        self.assertEqual(
            set(info),
            {
                "version",
                "tf_running_version",
                "tf_version",
                "tf_releases",
                "op_library",
                "cxx11_abi_flag",
                "cxx_standard",
                "cuda",
                "cuda_capabilities",
                "gpu_kernels",
                "gpu_kernels_reason",
                "cuda_runtime_version",
                "cuda_driver_floor",
                "cuda_driver_version",
                "xla",
                "xla_unavailable_reason",
                "xla_custom_calls",
                "xla_custom_call_api",
                "xla_ffi_handlers",
            },
        )
        self.assertEqual(info["xla"], build_info.XLA)
        # TensorFlow 2.20 and newer ship XLA's typed FFI, 2.12 to 2.19 take
        # the legacy custom calls (docs/xla.md), where an op lowers to them.
        release = tuple(int(part) for part in tf.__version__.split(".")[:2])
        custom_calls = info["xla"] and any(
            entry.xla_custom_call for entry in registry.entries().values()
        )
        self.assertEqual(info["xla_custom_calls"], custom_calls)
        api = "typed_ffi" if release >= (2, 20) else "legacy"
        self.assertEqual(info["xla_custom_call_api"], api if custom_calls else "")
        # xla_test holds the host handlers to the lowerings' targets, and
        # tools/gpu_check's test the CUDA ones to gpu_check's.
        handlers = info["xla_ffi_handlers"]
        if info["xla_custom_call_api"] == "typed_ffi":
            self.assertNotEmpty(handlers["Host"])
            self.assertLessEqual(
                set(handlers), {"Host", "CUDA"} if info["cuda"] else {"Host"}
            )
        else:
            self.assertEqual(handlers, {})
        self.assertEqual(info["xla_unavailable_reason"] == "", info["xla"])
        self.assertEqual(info["version"], tfco.__version__)
        self.assertEqual(info["tf_running_version"], tf.__version__)
        self.assertEqual(info["tf_version"], build_info.TF_VERSION)
        self.assertIn(".".join(tf.__version__.split(".")[:2]), info["tf_releases"])
        self.assertEqual(os.path.basename(info["op_library"]), "_custom_ops.so")
        self.assertTrue(os.path.isfile(info["op_library"]), info["op_library"])
        self.assertEqual(
            f"-D_GLIBCXX_USE_CXX11_ABI={info['cxx11_abi_flag']}",
            [
                f
                for f in tf.sysconfig.get_compile_flags()
                if f.startswith("-D_GLIBCXX_USE_CXX11_ABI")
            ][0],
        )
        self.assertEqual(info["cuda"], bool(info["cuda_capabilities"]))
        # Callers may mutate the result without affecting the package.
        info["cuda_capabilities"].append("sm_0")
        self.assertNotIn("sm_0", tfco.build_info()["cuda_capabilities"])


if __name__ == "__main__":
    tf.test.main()
