#!/usr/bin/env python3
"""Checks that a glue imports from TensorFlow only what that release exports.

A glue built for another TensorFlow release links empty stand-ins for its
libraries (build_defs/libraries.bzl), so the linker cannot tell whether
TensorFlow exports what the glue needs; this does, before the glue goes
into the wheel, and copies it there.

  check_glue_imports.py GLUE OUT EXPORTS...

EXPORTS are TensorFlow's shared libraries, or the `.symbols.gz` lists of the
names they export (tools/fetch_tf_headers.py). An undefined symbol without a
version, or with TensorFlow's (`tensorflow`), must be one of those names or
the portable kernels' C interface (Tfco*); versioned ones (GLIBC_, GLIBCXX_, ...)
come from the system's libraries.
"""

import gzip
import shutil
import subprocess
import sys


def _nm(*args):
    return subprocess.run(
        ["nm", "-D", "--format=posix", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def exported_names(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return set(f.read().split())
    return {line.split()[0].split("@")[0] for line in _nm("--defined-only", path)}


def missing_imports(glue, exports):
    """The symbols `glue` imports from TensorFlow that `exports` lacks."""
    missing = []
    for line in _nm("--undefined-only", glue):
        symbol, kind = line.split()[:2]
        name, _, version = symbol.partition("@")
        if kind in "wv" or version not in ("", "tensorflow") or name.startswith("Tfco"):
            continue
        if name not in exports:
            missing.append(name)
    return sorted(missing)


def main():
    glue, out, *export_files = sys.argv[1:]
    exports = set().union(*(exported_names(path) for path in export_files))
    missing = missing_imports(glue, exports)
    if missing:
        shown = subprocess.run(
            ["c++filt"], input="\n".join(missing[:20]), capture_output=True, text=True
        ).stdout
        sys.exit(
            f"{glue} imports {len(missing)} symbols that its TensorFlow "
            f"({', '.join(export_files)}) does not export, among them:\n{shown}"
        )
    shutil.copyfile(glue, out)


if __name__ == "__main__":
    main()
