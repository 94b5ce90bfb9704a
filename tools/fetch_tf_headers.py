#!/usr/bin/env python3
"""Fills the cache of TensorFlow releases the wheel builds a glue for.

For each release (major.minor) it downloads the newest patch of the
`tensorflow` wheel from PyPI once, keeps its C++ headers and the names of the
symbols its two shared libraries export, and deletes the wheel: the Bazel
repositories @tf_2_NN (third_party/tf/tf_configure.bzl) read that cache, so
nothing is downloaded at build time. Run by tools/build_wheel.sh's set-up.

  tools/fetch_tf_headers.py [--cache DIR] RELEASE...   (e.g. 2.12 2.21, or all)
"""

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

_TOOLS = os.path.dirname(os.path.abspath(__file__))
_RELEASES_BZL = os.path.join(_TOOLS, "..", "third_party", "tf", "releases.bzl")
sys.path.insert(0, _TOOLS)

from configure import tf_cache_dir  # noqa: E402

LIBRARIES = ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2")
# Every release in TF_RELEASES has a CPython 3.11 wheel: its headers and
# libraries do not depend on the Python it was built for.
_PYTHON_VERSION = "3.11"
# The glibc floors (manylinux tags) TensorFlow's wheels have used.
_GLIBC_FLOORS = (17, 27, 28)


def releases():
    """TF_RELEASES from third_party/tf/releases.bzl, which is also Python."""
    scope = {}
    with open(_RELEASES_BZL) as f:
        exec(f.read(), scope)
    return scope["TF_RELEASES"]


def exported_symbols(library):
    """The names `library` exports, without their version suffix (@@tensorflow)."""
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", "--format=posix", library],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(
        {line.split()[0].split("@")[0] for line in listed.splitlines() if line}
    )


def fetch(release, cache, python):
    """Puts release's headers and symbol lists under cache/release."""
    target = os.path.join(cache, release)
    if os.path.exists(os.path.join(target, "VERSION")):
        return False
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                _PYTHON_VERSION,
                *(f"--platform=manylinux_2_{glibc}_x86_64" for glibc in _GLIBC_FLOORS),
                "--dest",
                scratch,
                f"tensorflow=={release}.*",
            ],
            check=True,
        )
        (wheel,) = [f for f in os.listdir(scratch) if f.endswith(".whl")]
        version = wheel.split("-")[1]
        staged = os.path.join(scratch, "staged")
        with zipfile.ZipFile(os.path.join(scratch, wheel)) as archive:
            members = [
                name
                for name in archive.namelist()
                if name.startswith("tensorflow/include/")
                or name in ("tensorflow/" + lib for lib in LIBRARIES)
            ]
            archive.extractall(scratch, members)
        os.makedirs(staged)
        os.rename(
            os.path.join(scratch, "tensorflow", "include"),
            os.path.join(staged, "include"),
        )
        abi = 0
        for lib in LIBRARIES:
            names = exported_symbols(os.path.join(scratch, "tensorflow", lib))
            # std::__cxx11 appears in the exports of libraries built with the
            # new libstdc++ ABI only.
            abi |= any("__cxx11" in name for name in names)
            with gzip.open(os.path.join(staged, lib + ".symbols.gz"), "wt") as out:
                out.write("\n".join(names) + "\n")
        with open(os.path.join(staged, "CXX11_ABI_FLAG"), "w") as out:
            out.write(f"{int(abi)}\n")
        with open(os.path.join(staged, "VERSION"), "w") as out:
            out.write(version + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.rename(staged, target)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="+", help="major.minor releases, or `all`")
    parser.add_argument("--cache", default=tf_cache_dir())
    parser.add_argument(
        "--python", default=sys.executable, help="the Python whose pip downloads"
    )
    args = parser.parse_args()
    supported = releases()
    wanted = supported if args.releases == ["all"] else args.releases
    unknown = sorted(set(wanted) - set(supported))
    if unknown:
        parser.error(
            f"unsupported releases {unknown}; supported: {', '.join(supported)}"
        )
    os.makedirs(args.cache, exist_ok=True)
    for release in wanted:
        if fetch(release, args.cache, args.python):
            with open(os.path.join(args.cache, release, "VERSION")) as f:
                version = f.read().strip()
            print(f"fetched TensorFlow {version} headers into {args.cache}/{release}")


if __name__ == "__main__":
    main()
