"""The machinery boundary: which files of this repository are the machinery
every op repository shares, and how its names change in another repository.

The machinery is the build, wheel, loader, test, lint, compatibility, fuzz
and GPU-check code that knows no op family: CONTRIBUTING.md ("The machinery
and the families") states the boundary in words, this module in paths, for
the tools that copy the machinery and the test that holds it there.

Paths are relative to the repository root; in a pattern, `{package}` is the
package folder and `*` matches any characters, `/` included (fnmatch).
"""

import fnmatch
import os
import re
import subprocess

PACKAGE = "tensorflow_customops"
OP_PREFIX = "CustomOps"
# What tools/new_repo.py leaves in a repository it makes: its package and
# op prefix.
STAMP = ".machinery.json"

# Everything the machinery is made of, less FAMILY_PARTS.
MACHINERY = (
    "WORKSPACE",
    "BUILD",
    ".bazelrc",
    ".bazelignore",
    ".clang-format",
    ".gitignore",
    "ruff.toml",
    ".ci/*",
    "third_party/*",
    "tools/*",
    "docs/gpu.md",
    "docs/onnx.md",
    "docs/xla.md",
    "{package}/BUILD",
    "{package}/{package}.bzl",
    "{package}/build_defs/*",
    "{package}/onnx.py",
    "{package}/smoke.py",
    "{package}/core/BUILD",
    "{package}/core/__init__.py",
    "{package}/core/framework/*",
    "{package}/core/platform/*",
    "{package}/core/kernels/glue/*",
    "{package}/core/kernels/portable/*",
    "{package}/core/ops/BUILD",
    "{package}/core/ops/__init__.py",
    "{package}/core/ops/shape_util.h",
    "{package}/core/ops/compat/*",
    "{package}/compiler/tf2xla/*",
    "{package}/python/BUILD",
    "{package}/python/__init__.py",
    "{package}/python/ops/BUILD",
    "{package}/python/ops/__init__.py",
    "{package}/python/ops/cpp_gradients.py",
    "{package}/python/ops/export_util.py",
    "{package}/python/ops/load_library.py",
    "{package}/python/ops/op_specs.py",
    "{package}/python/ops/releases.py",
    "{package}/python/platform/*",
    "{package}/python/registry/BUILD",
    "{package}/python/registry/__init__.py",
    "{package}/python/registry/arrays.py",
    "{package}/python/registry/entry.py",
    "{package}/python/registry/large_shapes.py",
    "{package}/python/registry/values.py",
    "{package}/python/onnx/BUILD",
    "{package}/python/onnx/__init__.py",
    "{package}/python/onnx/errors.py",
    "{package}/python/onnx/export.py",
    "{package}/python/onnx/handler_util.py",
    "{package}/python/onnx/requirements.py",
    "{package}/python/onnx/handlers/__init__.py",
    "{package}/python/kernel_tests/BUILD",
    "{package}/python/kernel_tests/__init__.py",
    "{package}/python/kernel_tests/gradient_test_util.py",
    "{package}/python/kernel_tests/xla_test_util.py",
    "{package}/python/kernel_tests/loading/*",
    "{package}/python/kernel_tests/properties/*",
    "{package}/python/kernel_tests/onnx/BUILD",
    "{package}/python/kernel_tests/onnx/__init__.py",
    "{package}/python/kernel_tests/onnx/cli_test.py",
    "{package}/python/kernel_tests/onnx/onnx_coverage_test.py",
    "{package}/python/kernel_tests/onnx/onnx_test_util.py",
)

# What a family `{family}` (a key of TFCO_OPS) owns inside those patterns, and
# the recorded history and goldens of the repository's ops.
FAMILY_PARTS = (
    "{package}/core/ops/compat/registered_ops/*",
    "{package}/core/ops/compat/ops_history_v1/*",
    "{package}/core/ops/compat/testdata/*",
    "{package}/compiler/tf2xla/kernels/{family}/*",
    "tools/gpu_check/cases/{family}.py",
    "tools/gpu_check/runners/{family}.cu.cc",
    "tools/gpu_check/compare/{family}.py",
)

# The family tables: machinery in form, but their rows are the families'
# (tools/new_op.py adds one per family). A new repository gets them with no
# row.
TABLES = (
    "{package}/ops.bzl",
    "{package}/__init__.py",
)

# Machinery in form that each repository then keeps as its own: a new
# repository gets its own start of them, which updates leave alone.
STARTERS = ("{package}/version.py",)

# A TensorFlow op name: what the prefix of every op must fit into.
_OP_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*(>[A-Za-z0-9][A-Za-z0-9_]*)*")
_FAMILY_ROW = re.compile(r'^    "([a-z0-9_]+)": \[', re.M)
_FAMILY_TABLE = re.compile(r"^TFCO_OPS = \{(.*?)\}", re.M | re.S)


def substitute(text, package, op_prefix):
    """This repository's text (or path) as it reads in the repository of
    `package` whose ops carry `op_prefix`: the package's name (also as header
    guards spell it, and as pip does, with dashes), and the op prefix in op
    names (`CustomOps>Foo`), history file names (`CustomOps_Foo`), as a
    string (`"CustomOps"`) and in the functions of a loaded op library
    (`.custom_ops_foo`). The
    machinery's own identifiers (`tfco_*` macros, `TFCO_*`, the portable
    kernels' `Tfco*` C interface) stay: they are internal to each package's
    libraries."""
    # The functions first: in a repository whose package is its prefix in
    # snake case, the package's rule would take theirs.
    for old, new in (
        ("." + function_prefix(OP_PREFIX), "." + function_prefix(op_prefix)),
        (PACKAGE, package),
        (PACKAGE.upper(), package.upper()),
        (PACKAGE.replace("_", "-"), package.replace("_", "-")),
        (OP_PREFIX + ">", op_prefix + ">"),
        (OP_PREFIX + "_", op_prefix + "_"),
        (f'"{OP_PREFIX}"', f'"{op_prefix}"'),
    ):
        text = text.replace(old, new)
    return text


def function_prefix(op_prefix):
    """How TensorFlow's generated Python function names begin for ops named
    `op_prefix>...` (the function of `CustomOps>Foo` is `lib.custom_ops_foo`):
    its GenerateLowerCaseOpName, which puts `_` for `>` and before a capital
    that follows a lowercase letter or precedes one."""
    name = op_prefix + ">"
    out = []
    for i, c in enumerate(name):
        if c == ">":
            out.append("_")
            continue
        if c.isupper() and i > 0 and name[i - 1] != ">":
            if name[i - 1].islower() or name[i + 1].islower():
                out.append("_")
        out.append(c.lower())
    return "".join(out)


def check_op_prefix(prefix):
    """Raises ValueError unless `PREFIX>Foo` is an op name TensorFlow
    accepts (its op names match [A-Z][a-zA-Z0-9>_]*, and `>` separates
    non-empty parts)."""
    if not _OP_NAME.fullmatch(prefix + ">Foo"):
        raise ValueError(
            f"--op-prefix {prefix!r}: TensorFlow's op names are "
            "[A-Z][a-zA-Z0-9>_]*, with no empty part between '>'s; "
            "the prefix must start with a capital letter"
        )


def families(root, package=PACKAGE):
    """The op families of the repository at `root` (TFCO_OPS's keys)."""
    with open(os.path.join(root, package, "ops.bzl")) as f:
        return _FAMILY_ROW.findall(_FAMILY_TABLE.search(f.read()).group(1))


def _expand(patterns, package, family_names=()):
    expanded = []
    for pattern in patterns:
        pattern = pattern.replace("{package}", package)
        if "{family}" in pattern:
            expanded += [pattern.replace("{family}", f) for f in family_names]
        else:
            expanded.append(pattern)
    return expanded


def _matches(path, patterns):
    return any(fnmatch.fnmatchcase(path, p) for p in patterns)


def tracked_files(root):
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.decode()
    # Less the files deleted but not yet committed.
    return sorted(
        p for p in listed.split("\0") if p and os.path.lexists(os.path.join(root, p))
    )


def machinery_files(root, package=PACKAGE):
    """The machinery's files in the repository at `root`, tables and
    starters included, sorted."""
    names = families(root, package)
    machinery = _expand(MACHINERY + TABLES + STARTERS, package)
    owned = _expand(FAMILY_PARTS, package, names)
    return [
        p
        for p in tracked_files(root)
        if _matches(p, machinery) and not _matches(p, owned)
    ]


def tables(package=PACKAGE):
    return _expand(TABLES, package)


def starters(package=PACKAGE):
    return _expand(STARTERS, package)


def family_pattern(family_names, op_names):
    """A regex that finds an op family of this repository in a text: a
    family's name in any case and spelling (`foo_bar`, `FooBar`, `FOO_BAR`) or
    one of its ops' names."""
    words = [
        r"(?i:(?<![a-z0-9])" + re.escape(name).replace("_", "_?") + r")(?![a-z])"
        for name in family_names
    ]
    # An op's name, also as its portable entry point spells it (`TfcoFoo`).
    words += [
        r"(?:(?<![A-Za-z])|(?<=Tfco))" + re.escape(op) + r"(?![a-z])" for op in op_names
    ]
    return re.compile("|".join(words))
