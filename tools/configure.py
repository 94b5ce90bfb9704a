#!/usr/bin/env python3
"""Writes .tf_configure.bazelrc from the installed TensorFlow.

Every value the build needs (include and library paths, library name, ABI
flag, C++ standard, Eigen alignment, CUDA build info, the Python interpreter)
is read from `tf.sysconfig` and the interpreter running this script; nothing
is hard-coded. The CUDA 12 route (`--config=cuda12`, docs/gpu.md) is set up
from what tools/setup.sh installed: clang 16, and NVIDIA's CUDA 12 wheels,
which this script lays out as one toolkit folder for clang. The output is
deterministic, so running it twice changes nothing.
Usage: python3 tools/configure.py [--output PATH]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

_COMPUTE_PREFIX = "compute_"  # as printed by `nvcc --list-gpu-arch`


def parse_compile_flags(flags):
    """Splits tf.sysconfig.get_compile_flags() into named values."""
    parsed = {"include_dirs": [], "defines": {}, "std": None}
    for flag in flags:
        if flag.startswith("-I"):
            parsed["include_dirs"].append(flag[2:])
        elif flag.startswith("-D"):
            key, _, value = flag[2:].partition("=")
            parsed["defines"][key] = value
        elif re.fullmatch(r"-{1,2}std=(.+)", flag):
            parsed["std"] = flag.split("=", 1)[1]
        else:
            raise ValueError(f"unrecognised TensorFlow compile flag: {flag!r}")
    if len(parsed["include_dirs"]) != 1:
        raise ValueError(f"expected one -I flag, got {parsed['include_dirs']}")
    for required in ("_GLIBCXX_USE_CXX11_ABI", "EIGEN_MAX_ALIGN_BYTES"):
        if required not in parsed["defines"]:
            raise ValueError(f"TensorFlow compile flags lack -D{required}")
    if not parsed["std"]:
        raise ValueError("TensorFlow compile flags lack a C++ standard")
    return parsed


def parse_link_flags(flags):
    """Splits tf.sysconfig.get_link_flags() into library dir and file name."""
    lib_dirs = [f[2:] for f in flags if f.startswith("-L")]
    libs = [f for f in flags if f.startswith("-l")]
    if len(lib_dirs) != 1 or len(libs) != 1:
        raise ValueError(f"unexpected TensorFlow link flags: {flags}")
    lib = libs[0][2:]
    # `-l:libfoo.so.2` names a file; `-lfoo` names libfoo.so.
    lib_name = lib[1:] if lib.startswith(":") else f"lib{lib}.so"
    return lib_dirs[0], lib_name


def nvcc_capabilities(nvcc, tf_capabilities):
    """TensorFlow's CUDA capabilities that this nvcc can still target.

    TensorFlow lists e.g. sm_60 and compute_90; newer nvcc releases drop old
    architectures, so keep those nvcc supports and, if TensorFlow's oldest
    ones are gone, start from nvcc's oldest supported one.
    """
    out = subprocess.run(
        [nvcc, "--list-gpu-arch"], capture_output=True, text=True, check=True
    ).stdout.split()
    supported = sorted(
        int(a[len(_COMPUTE_PREFIX) :]) for a in out if a.startswith(_COMPUTE_PREFIX)
    )
    wanted = sorted({int(re.sub(r"\D", "", c)) for c in tf_capabilities})
    if not supported or not wanted:
        return []
    kept = [c for c in wanted if c in supported]
    if wanted[0] < supported[0] and supported[0] not in kept:
        kept.insert(0, supported[0])
    return [str(c) for c in sorted(kept)]


def find_nvcc():
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None, None
    # /usr/local/bin/nvcc may be a wrapper script; ask nvcc where CUDA lives.
    probe = subprocess.run(
        [nvcc, "--dryrun", "-E", "-x", "cu", os.devnull],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"#\$ TOP=(\S+)", probe.stdout + probe.stderr)
    if not match:
        raise RuntimeError(f"cannot find the CUDA toolkit of {nvcc}")
    return nvcc, os.path.realpath(match.group(1))


# What tools/setup.sh installs for the CUDA 12 route, and which wheel holds
# each folder clang reads from a CUDA toolkit.
CUDA12_REQUIREMENTS = os.path.join(os.path.dirname(__file__), "requirements-cuda12.txt")
CLANG_CUDA = "clang-16"
_CUDA12_INCLUDES = ["cuda_runtime", "cuda_nvcc", "cuda_cccl", "curand"]
_CUDA12_LINKS = {
    "lib64/libcudart_static.a": "cuda_runtime/lib/libcudart_static.a",
    "bin/ptxas": "cuda_nvcc/bin/ptxas",
    "nvvm/libdevice": "cuda_nvcc/nvvm/libdevice",
}

# clang 16 hands fatbinary CUDA 12's image options; the fatbinary here (the
# nvcc toolkit's, CUDA 13) takes only --image3. The fat binary is left
# uncompressed so that any CUDA 12 driver reads it.
_FATBINARY_WRAPPER = """#!/bin/bash
# Written by tools/configure.py: rewrites clang's fatbinary arguments.
args=()
for a in "$@"; do
  if [[ "$a" =~ ^--image=profile=(sm|compute)_([0-9]+[a-z]?),file=(.*)$ ]]; then
    kind=elf
    [[ "${BASH_REMATCH[1]}" == compute ]] && kind=ptx
    a="--image3=kind=${kind},sm=${BASH_REMATCH[2]},file=${BASH_REMATCH[3]}"
  fi
  args+=("$a")
done
exec {fatbinary} --compress=false "${args[@]}"
"""

# The CUDA release whose drivers first read a PTX ISA version (NVIDIA's PTX
# ISA release notes): a driver compiles PTX only up to its own CUDA's ISA.
_PTX_ISA_CUDA = {
    "7.8": 11080,
    "8.0": 12000,
    "8.1": 12010,
    "8.2": 12020,
    "8.3": 12030,
    "8.4": 12040,
    "8.5": 12050,
    "8.6": 12070,
    "8.7": 12080,
    "8.8": 12090,
    "9.0": 13000,
}


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "tensorflow_customops")


def cuda12_dir():
    """Where tools/setup.sh installs the CUDA 12 wheels (site/) and this
    script lays out their toolkit (toolkit/)."""
    return os.environ.get("TFCO_CUDA12_DIR") or os.path.join(cache_dir(), "cuda12")


def write_if_changed(path, text, mode=None):
    """Writes `text` to `path` unless it holds it already; True if written."""
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path, "w") as f:
            f.write(text)
    if mode is not None and os.stat(path).st_mode & 0o777 != mode:
        os.chmod(path, mode)
    return old != text


def _symlink(target, link):
    if os.path.islink(link) and os.readlink(link) == target:
        return
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(target, link)


def assemble_cuda12_toolkit(site, toolkit, fatbinary):
    """Lays out the CUDA 12 wheels under `site` (pip --target) as a toolkit
    folder clang accepts as --cuda-path: one include/ of every wheel's
    headers, libcudart_static.a, ptxas and libdevice, by symbolic links, and
    bin/fatbinary, the wrapper around `fatbinary`. Returns the toolkit, or
    None if a wheel is missing."""
    nvidia = os.path.join(site, "nvidia")
    needed = [os.path.join(nvidia, w, "include") for w in _CUDA12_INCLUDES]
    needed += [os.path.join(nvidia, src) for src in _CUDA12_LINKS.values()]
    if not all(os.path.exists(p) for p in needed):
        return None
    for sub in ("include", "lib64", "bin", "nvvm"):
        os.makedirs(os.path.join(toolkit, sub), exist_ok=True)
    for wheel in _CUDA12_INCLUDES:
        include = os.path.join(nvidia, wheel, "include")
        for entry in sorted(os.listdir(include)):
            if entry.startswith("__") or entry.endswith(".py"):
                continue  # the wheels' Python package files
            _symlink(
                os.path.join(include, entry), os.path.join(toolkit, "include", entry)
            )
    for link, src in _CUDA12_LINKS.items():
        _symlink(os.path.join(nvidia, src), os.path.join(toolkit, link))
    write_if_changed(
        os.path.join(toolkit, "bin", "fatbinary"),
        _FATBINARY_WRAPPER.replace("{fatbinary}", fatbinary),
        0o755,
    )
    return toolkit


def ptx_cuda_version(ptx):
    """The CUDA release whose drivers compile this PTX (from its .version)."""
    match = re.search(r"^\.version\s+(\d+\.\d+)", ptx, re.MULTILINE)
    if not match or match.group(1) not in _PTX_ISA_CUDA:
        raise RuntimeError(f"unknown PTX ISA version in {ptx[:200]!r}")
    return _PTX_ISA_CUDA[match.group(1)]


def clang_cuda_probe(clang, toolkit, capabilities):
    """The capabilities clang can compile for with this toolkit, and the
    CUDA release whose drivers compile the PTX it writes for the newest."""
    kept = []
    for c in capabilities:
        probe = subprocess.run(
            [
                clang,
                "-x",
                "cuda",
                "-E",
                "-nocudalib",
                f"--cuda-path={toolkit}",
                "-Wno-unknown-cuda-version",
                f"--cuda-gpu-arch=sm_{c}",
                os.devnull,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            kept.append(c)
    if not kept:
        return [], 0
    ptx = subprocess.run(
        [
            clang,
            "-x",
            "cuda",
            "-S",
            "--cuda-device-only",
            "-nocudalib",
            f"--cuda-path={toolkit}",
            "-Wno-unknown-cuda-version",
            f"--cuda-gpu-arch=sm_{kept[-1]}",
            "-o",
            "-",
            "-",
        ],
        input="__global__ void k() {}\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return kept, ptx_cuda_version(ptx)


def find_clang_cuda(cuda_dir, tf_capabilities):
    """The CUDA 12 route's values, or {} where set-up did not install it (or
    no fatbinary is at hand)."""
    clang = shutil.which(CLANG_CUDA)
    fatbinary = os.path.join(cuda_dir, "bin", "fatbinary") if cuda_dir else None
    if not clang or not fatbinary or not os.path.exists(fatbinary):
        return {}
    toolkit = assemble_cuda12_toolkit(
        os.path.join(cuda12_dir(), "site"),
        os.path.join(cuda12_dir(), "toolkit"),
        fatbinary,
    )
    if not toolkit:
        return {}
    wanted = sorted({int(re.sub(r"\D", "", c)) for c in tf_capabilities})
    capabilities, ptx_version = clang_cuda_probe(
        clang, toolkit, [str(c) for c in wanted]
    )
    if not capabilities:
        return {}
    return {
        "CLANG_CUDA_PATH": os.path.realpath(clang),
        "CLANG_CUDA_TOOLKIT_PATH": toolkit,
        "CLANG_CUDA_CAPABILITIES": ",".join(capabilities),
        "CLANG_CUDA_PTX_VERSION": str(ptx_version),
    }


def cc_library_name(lib_dir, framework_name):
    """File name of TensorFlow's C++ library (the XLA op registry lives there).

    It sits next to the framework library with the same version suffix;
    returns "" if this TensorFlow has none, and the XLA library is not built.
    """
    name = framework_name.replace("tensorflow_framework", "tensorflow_cc", 1)
    return name if os.path.exists(os.path.join(lib_dir, name)) else ""


def tf_cache_dir():
    """Where tools/fetch_tf_headers.py keeps other TensorFlow releases' headers."""
    if os.environ.get("TFCO_TF_CACHE"):
        return os.path.abspath(os.environ["TFCO_TF_CACHE"])
    return os.path.join(cache_dir(), "tensorflow")


def collect():
    import tensorflow as tf

    compile_flags = parse_compile_flags(tf.sysconfig.get_compile_flags())
    lib_dir, lib_name = parse_link_flags(tf.sysconfig.get_link_flags())
    info = tf.sysconfig.get_build_info()
    values = {
        "TF_VERSION": tf.__version__,
        "TF_HEADER_DIR": compile_flags["include_dirs"][0],
        "TF_SHARED_LIBRARY_DIR": lib_dir,
        "TF_SHARED_LIBRARY_NAME": lib_name,
        "TF_CC_LIBRARY_NAME": cc_library_name(lib_dir, lib_name),
        "TF_CXX11_ABI_FLAG": compile_flags["defines"]["_GLIBCXX_USE_CXX11_ABI"],
        "TF_CXX_STANDARD": compile_flags["std"],
        "TF_EIGEN_MAX_ALIGN_BYTES": compile_flags["defines"]["EIGEN_MAX_ALIGN_BYTES"],
        "TF_IS_CUDA_BUILD": "1" if info.get("is_cuda_build") else "0",
        "TF_CUDA_VERSION": info.get("cuda_version", ""),
        "PYTHON_BIN_PATH": sys.executable,
        "TFCO_TF_CACHE": tf_cache_dir(),
    }
    nvcc, cuda_dir = find_nvcc()
    if nvcc and info.get("is_cuda_build"):
        values["NVCC_PATH"] = nvcc
        values["CUDA_TOOLKIT_PATH"] = cuda_dir
        values["TF_CUDA_CAPABILITIES"] = ",".join(
            nvcc_capabilities(nvcc, info.get("cuda_compute_capabilities", []))
        )
        values.update(
            find_clang_cuda(cuda_dir, info.get("cuda_compute_capabilities", []))
        )
    return values


def compiler_library(name):
    """Path of the compiler's runtime library `name` (resolved), or None."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        return None
    path = subprocess.run(
        [cxx, f"-print-file-name={name}"], capture_output=True, text=True
    ).stdout.strip()
    return os.path.realpath(path) if os.path.isabs(path) else None


def sanitizer_preloads():
    """LD_PRELOAD values for tests under each sanitizer config.

    Python is not built with a sanitizer, so the runtime must be loaded before
    anything else. ASan also needs libstdc++ preloaded: it looks up the real
    __cxa_throw when it starts, and Python only loads libstdc++ later (with
    TensorFlow), which leaves ASan's exception interceptor pointing nowhere and
    aborts the first C++ throw.
    """
    asan, ubsan, libstdcxx = (
        compiler_library(name) for name in ("libasan.so", "libubsan.so", "libstdc++.so")
    )
    preloads = {}
    if asan and libstdcxx:
        preloads["asan"] = f"{asan}:{libstdcxx}"
    if ubsan:
        preloads["ubsan"] = ubsan
    return preloads


_RUN_OPTIONS = {"asan": "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "}


def render(values, preloads):
    lines = [
        "# Generated by tools/configure.py from the installed TensorFlow.",
        "# Do not edit; re-run the script instead.",
    ]
    for key in sorted(values):
        lines.append(f"build --repo_env={key}={values[key]}")
    lines.append(f"build --action_env=PYTHON_BIN_PATH={values['PYTHON_BIN_PATH']}")
    for config in sorted(preloads):
        lines.append(f"test:{config} --test_env=LD_PRELOAD={preloads[config]}")
        # .bazelrc's test:asan sets ASAN_OPTIONS for tests; a run needs them
        # too: the preloaded runtime is in every process the command starts,
        # and LeakSanitizer fails the shell scripts that start Python (pyenv's
        # shims) when they exit.
        options = _RUN_OPTIONS.get(config, "")
        lines.append(
            f"run:{config} --run_under='env {options}LD_PRELOAD={preloads[config]}'"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join(root, ".tf_configure.bazelrc"))
    args = parser.parse_args(argv)
    written = write_if_changed(args.output, render(collect(), sanitizer_preloads()))
    print(("wrote " if written else "unchanged ") + args.output)


if __name__ == "__main__":
    main()
