"""Writes a new op family from the template in tools/op_template/.

    python3 tools/new_op.py NAME [--function FUNCTION] [--skip-compat]

NAME is snake_case (`scale_by`); the op is `CustomOps>ScaleBy`, and the
Python function `tfco.NAME`, or `tfco.FUNCTION` with --function (a shorter
public name, say). The template is a complete op, y = alpha * x in half,
bfloat16, float and double: spec and shape function, C++ gradient, functor
header, CPU kernel with validation, GPU kernel, Python wrapper and gradient,
tests and the ONNX export's test, smoke checks, registry entry, GPU check
cases and runner, and the ONNX handler. The files it writes are the op's
own, most of them in folders of the family's own with their BUILD files
(core/kernels/NAME/, compiler/tf2xla/kernels/NAME/, python/kernel_tests/NAME/),
and the GPU check's cases and runner register themselves; of the shared files
it changes two, adding the family to TFCO_OPS (ops.bzl) and its function to
the package's imports and __all__. Then it records the spec's history and
goldens (bazel run //tensorflow_customops/core/ops/compat:update_ops_history
and :record_goldens) unless --skip-compat.
Replace the maths, keep the structure, and run the tests.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TEMPLATE = os.path.join(_ROOT, "tools", "op_template")
_NAME = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


class ScaffoldError(Exception):
    pass


def check_name(name, what="NAME"):
    """Raises ScaffoldError unless `name` is snake_case."""
    if not _NAME.fullmatch(name):
        raise ScaffoldError(f"{what} must be snake_case, got {name!r}")


def _names(name, function=None):
    return {
        "{{name}}": name,
        "{{Name}}": "".join(part.capitalize() for part in name.split("_")),
        "{{NAME}}": name.upper(),
        "{{function}}": function or name,
    }


def _fill(text, names):
    for key, value in names.items():
        text = text.replace(key, value)
    return text


def _template_files():
    """(template path, repository path with NAME still in it) of the files
    the op owns."""
    for directory, _, files in os.walk(_TEMPLATE):
        for file_name in sorted(files):
            path = os.path.join(directory, file_name)
            relative = os.path.relpath(path, _TEMPLATE)
            yield path, relative[: -len(".tmpl")]


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _insert_before(text, anchor, addition, what):
    if text.count(anchor) != 1:
        raise ScaffoldError(f"{what}: expected one {anchor.strip()!r}")
    return text.replace(anchor, addition + anchor)


def _add_to_tfco_ops(root, name):
    path = os.path.join(root, "tensorflow_customops", "ops.bzl")
    text = _read(path)
    # A new repository's table is empty: `TFCO_OPS = {}`.
    match = re.search(r"TFCO_OPS = \{\n?((?:    .*\n)*)\}", text)
    if not match:
        raise ScaffoldError(f"{path}: no TFCO_OPS table")
    lines = match.group(1).splitlines(keepends=True)
    lines.append(f'    "{name}": ["{name}_op"],\n')
    lines.sort()
    table = "TFCO_OPS = {\n" + "".join(lines) + "}"
    _write(path, text[: match.start()] + table + text[match.end() :])
    return path


def _export(root, name, function):
    """Imports `function` from the op's module into the package and adds it
    to __all__, keeping the list's order where it is sorted."""
    path = os.path.join(root, "tensorflow_customops", "__init__.py")
    text = _insert_before(
        _read(path),
        "from tensorflow_customops.version import __version__\n",
        f"from tensorflow_customops.python.ops.{name}_ops import {function}\n",
        path,
    )
    match = re.search(r"__all__ = \[\n((?:    .*\n)*)\]", text)
    if not match:
        raise ScaffoldError(f"{path}: no __all__ list")
    entries = match.group(1).splitlines(keepends=True)
    entry = f'    "{function}",\n'
    # Insert before the first later name (ignoring the dunders at the end).
    position = next(
        (
            i
            for i, line in enumerate(entries)
            if line.strip().startswith('"__') or line > entry
        ),
        len(entries),
    )
    entries.insert(position, entry)
    text = text[: match.start(1)] + "".join(entries) + text[match.end(1) :]
    _write(path, text)
    return path


def _format(paths):
    """Formats what was written, where the formatters are installed."""
    python = [p for p in paths if p.endswith(".py")]
    cpp = [p for p in paths if p.endswith((".cc", ".h"))]
    if python:
        for args in (["check", "--fix", "--select", "I"], ["format"]):
            subprocess.run(
                [sys.executable, "-m", "ruff", *args, *python],
                check=False,
                capture_output=True,
            )
    if cpp and shutil.which("clang-format"):
        subprocess.run(["clang-format", "-i", *cpp], check=True)


def scaffold(root, name, function=None):
    """Writes op `name` into the repository at `root`, its Python function
    named `function` (default: `name`); returns (path, whether it existed)
    for every file written: the op's own files, then the two shared files it
    adds the op to."""
    check_name(name)
    if function is not None:
        check_name(function, "FUNCTION")
    names = _names(name, function)
    files = [
        (src, os.path.join(root, dst.replace("NAME", name)))
        for src, dst in _template_files()
    ]
    existing = [dst for _, dst in files if os.path.exists(dst)]
    if existing:
        raise ScaffoldError(f"{name} exists already: {existing[0]}")
    written = []
    for src, dst in files:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        _write(dst, _fill(_read(src), names))
        written.append(dst)
    changed = [
        _add_to_tfco_ops(root, name),
        _export(root, name, names["{{function}}"]),
    ]
    _format(written + changed)
    return [(path, False) for path in written] + [(path, True) for path in changed]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the op family, snake_case")
    parser.add_argument(
        "--function",
        help="the Python function's name, snake_case (default: NAME)",
    )
    parser.add_argument(
        "--skip-compat",
        action="store_true",
        help="do not record the spec history and goldens",
    )
    args = parser.parse_args(argv)
    try:
        written = scaffold(_ROOT, args.name, args.function)
    except ScaffoldError as e:
        sys.exit(f"new_op: {e}")
    for path, existed in written:
        print("changed" if existed else "wrote", os.path.relpath(path, _ROOT))
    if not args.skip_compat:
        for target in ("update_ops_history", "record_goldens"):
            subprocess.run(
                ["bazel", "run", f"//tensorflow_customops/core/ops/compat:{target}"],
                cwd=_ROOT,
                check=True,
            )
    print(
        f"CustomOps>{_names(args.name)['{{Name}}']} is in place: replace the maths "
        "(kernels, gradients, reference in the test), then bazel test //..."
    )


if __name__ == "__main__":
    main(sys.argv[1:])
