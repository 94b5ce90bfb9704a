"""Writes a new op family from the template in tools/op_template/.

    python3 tools/new_op.py NAME [--function FUNCTION] [--skip-compat]

NAME is snake_case (`scale_by`); the op is `CustomOps>ScaleBy`, and the
Python function `tfco.NAME`, or `tfco.FUNCTION` with --function (a shorter
public name, say). The template
is a complete op, y = alpha * x in half, bfloat16, float and double: spec and
shape function, C++ gradient, functor header, CPU kernel with validation, GPU
kernel, Python wrapper and gradient, tests, registry entry, GPU check cases
and runner, the ONNX handler and its test, and the export. The files it
writes are the op's own; in shared files it adds the op's line to each table
(TFCO_OPS, python/kernel_tests/BUILD and its onnx/BUILD,
the package's imports and __all__, the GPU check's case list and runner map)
and its GPU check cases and runner. Then it
records the spec's history and goldens (bazel run
//tensorflow_customops/core/ops/compat:update_ops_history and :record_goldens)
unless --skip-compat.
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
    root = os.path.join(_TEMPLATE, "tensorflow_customops")
    for directory, _, files in os.walk(root):
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
    path = os.path.join(root, "tensorflow_customops", "tensorflow_customops.bzl")
    text = _read(path)
    match = re.search(r"TFCO_OPS = \{\n((?:    .*\n)*)\}", text)
    if not match:
        raise ScaffoldError(f"{path}: no TFCO_OPS table")
    lines = match.group(1).splitlines(keepends=True)
    lines.append(f'    "{name}": ["{name}_op"],\n')
    lines.sort()
    table = "TFCO_OPS = {\n" + "".join(lines) + "}"
    _write(path, text[: match.start()] + table + text[match.end() :])
    return path


def _append(root, relative, line):
    path = os.path.join(root, relative)
    _write(path, _read(path).rstrip("\n") + "\n\n" + line + "\n")
    return path


def _export(root, name, function):
    """Imports `function` from the op's module into the package and adds it
    to __all__, keeping the list's order where it is sorted."""
    path = os.path.join(root, "tensorflow_customops", "__init__.py")
    text = _insert_before(
        _read(path),
        "from tensorflow_customops.python.platform import build_info as _build_info\n",
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


def _add_gpu_check(root, names):
    name, camel = names["{{name}}"], names["{{Name}}"]
    cases_path = os.path.join(root, "tools", "gpu_check", "make_cases.py")
    text = _insert_before(
        _read(cases_path),
        "def all_cases():\n",
        _fill(_read(os.path.join(_TEMPLATE, "gpu_check", "cases.py.tmpl")), names),
        cases_path,
    )
    match = re.search(r"def all_cases\(\):\n(?:.*\n)*?(        \)\n)", text)
    if not match:
        raise ScaffoldError(f"{cases_path}: no case list in all_cases()")
    text = (
        text[: match.start(1)]
        + f"            + {name}_cases()\n"
        + text[match.start(1) :]
    )
    _write(cases_path, text)

    runner_path = os.path.join(root, "tools", "gpu_check", "gpu_check.cu.cc")
    text = _read(runner_path)
    includes = re.findall(
        r'#include "tensorflow_customops/core/kernels/[a-z0-9_]+/[a-z0-9_]+\.h"\n',
        text,
    )
    if not includes:
        raise ScaffoldError(f"{runner_path}: no kernel includes")
    text = text.replace(
        includes[-1],
        includes[-1]
        + f'#include "tensorflow_customops/core/kernels/{name}/{name}_op.h"\n',
    )
    text = _insert_before(
        text,
        "std::map<std::string, Tensor> Run(const Case& c, const GPUDevice& d) {\n",
        _fill(_read(os.path.join(_TEMPLATE, "gpu_check", "runner.cu.cc.tmpl")), names),
        runner_path,
    )
    text = _insert_before(
        text,
        "      };\n  const auto it = runners.find",
        f'          {{"{camel}", Run{camel}}},\n',
        runner_path,
    )
    _write(runner_path, text)
    return [cases_path, runner_path]


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
    named `function` (default: `name`); returns the paths written or
    changed."""
    if not _NAME.fullmatch(name):
        raise ScaffoldError(f"NAME must be snake_case, got {name!r}")
    if function is not None and not _NAME.fullmatch(function):
        raise ScaffoldError(f"FUNCTION must be snake_case, got {function!r}")
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
    written.append(_add_to_tfco_ops(root, name))
    written.append(
        _append(
            root,
            "tensorflow_customops/python/kernel_tests/BUILD",
            f'tfco_py_test(name = "{name}_op_test")',
        )
    )
    written.append(
        _append(
            root,
            "tensorflow_customops/python/kernel_tests/onnx/BUILD",
            f'tfco_py_test(\n    name = "{name}_onnx_test",\n'
            '    tags = ["onnx"],\n    deps = [":onnx_test_util"],\n)',
        )
    )
    written.append(_export(root, name, names["{{function}}"]))
    written += _add_gpu_check(root, names)
    _format(written)
    return written


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
    for path in written:
        print("wrote", os.path.relpath(path, _ROOT))
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
