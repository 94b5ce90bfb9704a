"""Tests of tools/configure.py: every value comes from tf.sysconfig, and the
output is stable across runs."""

import os
import stat
import subprocess
import tempfile
import unittest

import tensorflow as tf

from tools import configure


def _bazelrc_values(text):
    values = {}
    for line in text.splitlines():
        if line.startswith("build --repo_env="):
            key, _, value = line[len("build --repo_env=") :].partition("=")
            values[key] = value
    return values


class ParseTest(unittest.TestCase):
    def test_compile_flags(self):
        parsed = configure.parse_compile_flags(
            ["-I/x/include", "-D_GLIBCXX_USE_CXX11_ABI=0", "-std=c++20"]
            + ["-DEIGEN_MAX_ALIGN_BYTES=32"]
        )
        self.assertEqual(parsed["include_dirs"], ["/x/include"])
        self.assertEqual(parsed["defines"]["_GLIBCXX_USE_CXX11_ABI"], "0")
        self.assertEqual(parsed["defines"]["EIGEN_MAX_ALIGN_BYTES"], "32")
        self.assertEqual(parsed["std"], "c++20")

    def test_unknown_or_missing_flags_are_errors(self):
        base = ["-I/x", "-D_GLIBCXX_USE_CXX11_ABI=1", "--std=c++17"]
        with self.assertRaisesRegex(ValueError, "EIGEN_MAX_ALIGN_BYTES"):
            configure.parse_compile_flags(base)
        with self.assertRaisesRegex(ValueError, "unrecognised.*-fopenmp"):
            configure.parse_compile_flags(
                base + ["-DEIGEN_MAX_ALIGN_BYTES=64", "-fopenmp"]
            )

    def test_link_flags(self):
        self.assertEqual(
            configure.parse_link_flags(["-L/tf", "-l:libtensorflow_framework.so.2"]),
            ("/tf", "libtensorflow_framework.so.2"),
        )
        self.assertEqual(
            configure.parse_link_flags(["-L/tf", "-ltensorflow_framework"]),
            ("/tf", "libtensorflow_framework.so"),
        )
        with self.assertRaisesRegex(ValueError, "unexpected"):
            configure.parse_link_flags(["-L/tf"])

    def _fake_nvcc(self, archs):
        path = os.path.join(tempfile.mkdtemp(), "nvcc")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\necho '{' '.join(archs)}'\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
        return path

    def test_nvcc_capabilities_drop_what_nvcc_cannot_build(self):
        nvcc = self._fake_nvcc(["compute_75", "compute_80", "compute_89", "compute_90"])
        tf_caps = ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]
        # sm_60 and sm_70 are gone; nvcc's oldest (75) takes their place.
        self.assertEqual(
            configure.nvcc_capabilities(nvcc, tf_caps), ["75", "80", "89", "90"]
        )

    def test_nvcc_capabilities_keep_tensorflow_list_when_supported(self):
        nvcc = self._fake_nvcc(["compute_50", "compute_60", "compute_70", "compute_80"])
        self.assertEqual(
            configure.nvcc_capabilities(nvcc, ["sm_60", "sm_80"]), ["60", "80"]
        )


class Cuda12Test(unittest.TestCase):
    def _fake_site(self):
        site = tempfile.mkdtemp()
        for wheel in ("cuda_runtime", "cuda_nvcc", "cuda_cccl", "curand"):
            os.makedirs(os.path.join(site, "nvidia", wheel, "include"))
        for path in [
            "cuda_runtime/include/cuda_runtime.h",
            "cuda_runtime/include/__init__.py",
            "cuda_cccl/include/cub/cub.cuh",
            "cuda_runtime/lib/libcudart_static.a",
            "cuda_nvcc/bin/ptxas",
            "cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
        ]:
            path = os.path.join(site, "nvidia", path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
        return site

    def test_toolkit_layout(self):
        site = self._fake_site()
        toolkit = os.path.join(tempfile.mkdtemp(), "toolkit")
        for _ in range(2):  # a second run finds everything in place
            self.assertEqual(
                configure.assemble_cuda12_toolkit(site, toolkit, "/bin/fatbinary"),
                toolkit,
            )
        for path in [
            "include/cuda_runtime.h",
            "include/cub/cub.cuh",
            "lib64/libcudart_static.a",
            "bin/ptxas",
            "nvvm/libdevice/libdevice.10.bc",
        ]:
            self.assertTrue(os.path.exists(os.path.join(toolkit, path)), path)
        self.assertFalse(
            os.path.exists(os.path.join(toolkit, "include", "__init__.py"))
        )

    def test_toolkit_needs_every_wheel(self):
        site = self._fake_site()
        os.remove(os.path.join(site, "nvidia", "cuda_nvcc", "bin", "ptxas"))
        toolkit = os.path.join(tempfile.mkdtemp(), "toolkit")
        self.assertIsNone(
            configure.assemble_cuda12_toolkit(site, toolkit, "/bin/fatbinary")
        )

    def test_fatbinary_wrapper_rewrites_images(self):
        folder = tempfile.mkdtemp()
        fatbinary = os.path.join(folder, "real_fatbinary")
        with open(fatbinary, "w") as f:
            f.write('#!/bin/sh\nprintf "%s\\n" "$@"\n')
        os.chmod(fatbinary, 0o755)
        toolkit = configure.assemble_cuda12_toolkit(
            self._fake_site(), os.path.join(folder, "toolkit"), fatbinary
        )
        args = subprocess.run(
            [
                os.path.join(toolkit, "bin", "fatbinary"),
                "-64",
                "--create",
                "/o/x.fatbin",
                "--image=profile=sm_80,file=/t/a b.cubin",
                "--image=profile=compute_90,file=/t/x.s",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        self.assertEqual(
            args,
            [
                "--compress=false",
                "-64",
                "--create",
                "/o/x.fatbin",
                "--image3=kind=elf,sm=80,file=/t/a b.cubin",
                "--image3=kind=ptx,sm=90,file=/t/x.s",
            ],
        )

    def test_ptx_cuda_version(self):
        self.assertEqual(
            configure.ptx_cuda_version("//\n.version 7.8\n.target sm_90\n"), 11080
        )
        self.assertEqual(configure.ptx_cuda_version(".version 8.8\n"), 12090)
        with self.assertRaisesRegex(RuntimeError, "unknown PTX ISA"):
            configure.ptx_cuda_version(".version 99.1\n")


class ConfigureTest(unittest.TestCase):
    def test_values_come_from_tf_sysconfig(self):
        values = configure.collect()
        flags = tf.sysconfig.get_compile_flags()
        self.assertIn("-I" + values["TF_HEADER_DIR"], flags)
        self.assertIn("-D_GLIBCXX_USE_CXX11_ABI=" + values["TF_CXX11_ABI_FLAG"], flags)
        self.assertIn(
            "-DEIGEN_MAX_ALIGN_BYTES=" + values["TF_EIGEN_MAX_ALIGN_BYTES"], flags
        )
        self.assertTrue(
            any(f.endswith("std=" + values["TF_CXX_STANDARD"]) for f in flags)
        )
        self.assertIn(
            "-L" + values["TF_SHARED_LIBRARY_DIR"], tf.sysconfig.get_link_flags()
        )
        self.assertTrue(
            os.path.exists(
                os.path.join(
                    values["TF_SHARED_LIBRARY_DIR"], values["TF_SHARED_LIBRARY_NAME"]
                )
            )
        )
        self.assertEqual(values["TF_VERSION"], tf.__version__)
        info = tf.sysconfig.get_build_info()
        self.assertEqual(values["TF_IS_CUDA_BUILD"] == "1", bool(info["is_cuda_build"]))

    def test_sanitizer_runs_preload_the_runtime_with_the_tests_options(self):
        text = configure.render(
            {"PYTHON_BIN_PATH": "/p"}, {"asan": "/a.so:/s.so", "ubsan": "/u.so"}
        )
        self.assertIn("test:asan --test_env=LD_PRELOAD=/a.so:/s.so\n", text)
        # Without detect_leaks=0 the shell scripts that start Python fail.
        self.assertIn(
            "run:asan --run_under='env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "
            "LD_PRELOAD=/a.so:/s.so'\n",
            text,
        )
        self.assertIn("run:ubsan --run_under='env LD_PRELOAD=/u.so'\n", text)

    def test_output_is_written_once_and_stable(self):
        output = os.path.join(tempfile.mkdtemp(), ".tf_configure.bazelrc")
        configure.main(["--output", output])
        with open(output) as f:
            first = f.read()
        mtime = os.stat(output).st_mtime_ns
        configure.main(["--output", output])
        with open(output) as f:
            self.assertEqual(f.read(), first)
        self.assertEqual(os.stat(output).st_mtime_ns, mtime)
        values = _bazelrc_values(first)
        self.assertEqual(values["TF_VERSION"], tf.__version__)
        for required in [
            "PYTHON_BIN_PATH",
            "TF_HEADER_DIR",
            "TF_SHARED_LIBRARY_DIR",
            "TF_SHARED_LIBRARY_NAME",
            "TF_CXX11_ABI_FLAG",
            "TF_CXX_STANDARD",
            "TF_EIGEN_MAX_ALIGN_BYTES",
            "TF_IS_CUDA_BUILD",
            "TF_CUDA_VERSION",
        ]:
            self.assertIn(required, values)


if __name__ == "__main__":
    unittest.main()
