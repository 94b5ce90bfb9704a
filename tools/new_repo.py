"""Starts an op repository of your own with this repository's machinery, or
refreshes one started so.

    python3 tools/new_repo.py DEST --package NAME [--op-prefix PREFIX]
        [--op OP] [--skip-compat]
    python3 tools/new_repo.py --update DEST

The first form creates DEST, a git repository laid out like this one, whose
package imports as NAME and whose ops are named PREFIX>Op (default: NAME in
CamelCase): the machinery (tools/machinery.py says which files) with the
package and prefix substituted (and the sources that changed formatted as
DEST's lint wants them), the family tables with no family in them,
its own README.md and CONTRIBUTING.md, and a first commit; then DEST's own
tools/new_op.py writes the example op OP (default: scale) and records its
spec history and goldens with Bazel (not with --skip-compat), in a second
commit.

--update copies this repository's machinery into DEST again (files added,
changed and removed), leaving its ops, tables, version, history and goldens
as they are, and says what changed; DEST's package and prefix are read from
the stamp new_repo.py left there (.machinery.json).
"""

import argparse
import ast
import difflib
import importlib.machinery
import importlib.util
import json
import keyword
import os
import re
import shutil
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)

from tools import machinery, new_op  # noqa: E402

_TEMPLATES = os.path.join(_ROOT, "tools", "new_repo_templates")
STAMP = machinery.STAMP
_PACKAGE = re.compile(r"[a-z][a-z0-9_]*")
# Top-level ops.bzl tables: `NAME = {...}` or `NAME = [...]`, on one line or
# up to a closing line.
_TABLE = re.compile(r"^([A-Z_]+) = ([\[{])(?:[^\n]*[\]}]|\n.*?^[\]}])$", re.M | re.S)
_DOCSTRING = '''"""{package}: TensorFlow custom ops with CPU kernels, XLA lowerings and
(built where nvcc is) CUDA kernels.

    import {package}
"""
'''


class RepoError(Exception):
    pass


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _text(data, package, op_prefix):
    """A file's bytes as they read in the other repository (binary files
    are copied as they are)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data
    return machinery.substitute(text, package, op_prefix).encode()


def _format(folder, paths):
    """Formats `paths` under `folder` as its tools/lint.sh --fix would (a
    shorter or longer name can change where lines break)."""
    python = [p for p in paths if p.endswith(".py")]
    cpp = [p for p in paths if p.endswith((".cc", ".h"))]
    if python:
        for args in (["check", "--fix", "--select", "I", "--exit-zero"], ["format"]):
            subprocess.run(
                [sys.executable, "-m", "ruff", *args, *python],
                cwd=folder,
                check=True,
                capture_output=True,
            )
    if cpp and shutil.which("clang-format"):
        subprocess.run(["clang-format", "-i", *cpp], cwd=folder, check=True)


def render(folder, package, op_prefix):
    """Writes this repository's machinery, less its tables and starters, as
    it reads in the repository of `package` into `folder`: substituted, and
    where that changed a source file, formatted by that repository's rules.
    Returns the paths written."""
    own = set(machinery.tables() + machinery.starters())
    changed = []
    written = []
    for source in machinery.machinery_files(_ROOT):
        if source in own:
            continue
        path = machinery.substitute(source, package, op_prefix)
        data = _read(os.path.join(_ROOT, source))
        text = _text(data, package, op_prefix)
        _write(folder, path, text, _mode(source))
        written.append(path)
        if text != data:
            changed.append(path)
    _format(folder, changed)
    return written


def check_package(package):
    if not package.isidentifier() or not _PACKAGE.fullmatch(package):
        raise RepoError(
            f"--package {package!r}: not a Python package name "
            "(lowercase letters, digits and _, starting with a letter)"
        )
    if keyword.iskeyword(package) or package in ("tools", "third_party"):
        raise RepoError(f"--package {package!r}: reserved name")
    if package == machinery.PACKAGE:
        raise RepoError(f"--package {package!r} is this repository's package")
    installed = _installed(package)
    if installed:
        raise RepoError(
            f"--package {package!r} clashes with the installed module "
            f"{package} ({installed})"
        )


def _installed(package):
    """Where an installed module `package` is, if any (this repository's
    own folders, which this script's sys.path holds, left out)."""
    if package in sys.builtin_module_names:
        return "built in"
    ours = (_ROOT, os.path.join(_ROOT, "tools"))
    path = [p for p in sys.path if os.path.abspath(p or ".") not in ours]
    spec = importlib.machinery.PathFinder.find_spec(package, path)
    return spec and (spec.origin or spec.submodule_search_locations[0])


def _check_dest(dest):
    if os.path.exists(dest) and (not os.path.isdir(dest) or os.listdir(dest)):
        raise RepoError(f"{dest} exists and is not an empty folder")


def _check_git_identity():
    """The commits need a name and address: fail before writing, not after."""
    for ident in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        result = subprocess.run(
            ["git", "var", ident], cwd="/", capture_output=True, text=True
        )
        if result.returncode:
            raise RepoError(
                "git has no identity for the commits: set user.name and "
                f"user.email (git config --global ...): {result.stderr.strip()}"
            )


def camel_case(package):
    return "".join(part.capitalize() for part in package.split("_") if part)


def empty_ops_table(text):
    """ops.bzl with every table emptied: its form, with no family rows."""
    return _TABLE.sub(
        lambda m: f"{m.group(1)} = {'{}' if m.group(2) == '{' else '[]'}", text
    )


def empty_package_init(text, package, paths, machinery_paths):
    """The package's __init__.py with the imports of non-machinery modules
    (the families', and anything else of one repository's own) and their
    names in __all__ left out, under a docstring of the package's own.
    `paths` are the repository's files, `machinery_paths` its machinery."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    drop, names = set(), set()
    for node in tree.body:
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and node is tree.body[0]
        ):
            drop.update(range(node.lineno - 1, node.end_lineno))
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
            package + "."
        ):
            continue
        if not all(
            _module_file(node.module, a.name, paths) in machinery_paths
            for a in node.names
        ):
            drop.update(range(node.lineno - 1, node.end_lineno))
            names.update(a.asname or a.name for a in node.names)
    kept = "".join(line for i, line in enumerate(lines) if i not in drop)
    kept = re.sub(
        r'^    "(\w+)",\n',
        lambda m: "" if m.group(1) in names else m.group(0),
        kept,
        flags=re.M,
    )
    return _DOCSTRING.format(package=package) + kept


def _module_file(module, name, paths):
    """The file that `from module import name` reads."""
    folder = module.replace(".", "/")
    for path in (f"{folder}/{name}.py", f"{folder}/{name}/__init__.py"):
        if path in paths:
            return path
    return folder + ".py" if folder + ".py" in paths else folder + "/__init__.py"


def _tables(root, source_package, package, op_prefix, paths):
    """{path in the other repository: its table with no family row} from
    the tables of the repository at `root`, whose machinery is `paths`."""
    ops_bzl, init = machinery.tables(source_package)
    machinery_paths = {machinery.substitute(p, package, op_prefix) for p in paths}
    all_paths = {
        machinery.substitute(p, package, op_prefix)
        for p in machinery.tracked_files(root)
    }

    def sub(path):
        text = _read(os.path.join(root, path)).decode()
        return machinery.substitute(text, package, op_prefix)

    return {
        machinery.substitute(ops_bzl, package, op_prefix): empty_ops_table(
            sub(ops_bzl)
        ).encode(),
        machinery.substitute(init, package, op_prefix): empty_package_init(
            sub(init), package, all_paths, machinery_paths
        ).encode(),
    }


def _write(dest, path, data, mode=None):
    target = os.path.join(dest, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(target, mode)


def _mode(path):
    """The mode of this repository's file whose substituted path is `path`."""
    return os.stat(os.path.join(_ROOT, path)).st_mode & 0o777


def contributing_section(heading, package, op_prefix):
    """The section of this repository's CONTRIBUTING.md under `heading`, to
    the next heading of its level or above, as it reads in the repository of
    `package`: a description of the machinery that every repository shares
    (the machinery's comments cite it by its heading)."""
    lines = _read(os.path.join(_ROOT, "CONTRIBUTING.md")).decode().split("\n")
    start = level = None
    fenced = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"(#+) (.*)", line)
        if match and start is None and match.group(2) == heading:
            start, level = i, len(match.group(1))
        elif match and start is not None and len(match.group(1)) <= level:
            break
    else:
        i = len(lines)
    if start is None:
        raise RepoError(f'CONTRIBUTING.md has no section "{heading}"')
    text = "\n".join(lines[start:i]).rstrip("\n") + "\n"
    return machinery.substitute(text, package, op_prefix)


def _template(name, values):
    """A template filled: `{{key}}` by values[key], `{{section:Heading}}` by
    that section of this repository's CONTRIBUTING.md."""
    text = _read(os.path.join(_TEMPLATES, name + ".tmpl")).decode()
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    text = re.sub(
        r"\{\{section:([^}]+)\}\}\n",
        lambda m: contributing_section(m.group(1), values["package"], values["prefix"]),
        text,
    )
    return text.encode()


def _git(dest, *args):
    subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True)


def create(dest, package, op_prefix, op, skip_compat=False):
    """Writes the repository at `dest` and its example op `op`."""
    paths = machinery.machinery_files(_ROOT)
    source_paths = {machinery.substitute(p, package, op_prefix): p for p in paths}
    os.makedirs(dest, exist_ok=True)
    render(dest, package, op_prefix)
    files = _tables(_ROOT, machinery.PACKAGE, package, op_prefix, paths)
    for path in machinery.starters():
        files[machinery.substitute(path, package, op_prefix)] = _text(
            _read(os.path.join(_ROOT, path)), package, op_prefix
        )
    version = machinery.substitute(machinery.starters()[0], package, op_prefix)
    files[version] = re.sub(
        rb'__version__ = "[^"]*"', b'__version__ = "0.1.0"', files[version]
    )
    values = {
        "package": package,
        "prefix": op_prefix,
        "op": op,
        "Op": camel_case(op),
        "dist": package.replace("_", "-"),
    }
    for name in ("README.md", "CONTRIBUTING.md"):
        files[name] = _template(name, values)
    files[STAMP] = (
        json.dumps({"package": package, "op_prefix": op_prefix}, indent=2) + "\n"
    ).encode()
    for path, data in sorted(files.items()):
        source = source_paths.get(path)
        _write(dest, path, data, _mode(source) if source else None)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", f"{package}: the op repository's machinery")
    command = [sys.executable, "tools/new_op.py", op]
    if skip_compat:
        command.append("--skip-compat")
    else:
        # Bazel records the history and goldens: it needs the configuration.
        subprocess.run([sys.executable, "tools/configure.py"], cwd=dest, check=True)
    subprocess.run(command, cwd=dest, check=True)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", f"{values['Op']}, the example op")


def _load_machinery(dest):
    """DEST's own tools/machinery.py: the boundary its files were copied by."""
    spec = importlib.util.spec_from_file_location(
        "dest_machinery", os.path.join(dest, "tools", "machinery.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def update(dest):
    """Brings DEST's machinery to this repository's; returns
    (added, changed, removed, table notes)."""
    try:
        with open(os.path.join(dest, STAMP)) as f:
            stamp = json.load(f)
    except FileNotFoundError:
        raise RepoError(f"{dest}: no {STAMP}; not made by tools/new_repo.py") from None
    package, op_prefix = stamp["package"], stamp["op_prefix"]
    status = subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=dest,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if status:
        raise RepoError(f"{dest} has uncommitted changes: commit or stash them first")
    theirs = _load_machinery(dest)
    own = set(theirs.tables(package) + theirs.starters(package))
    before = [p for p in theirs.machinery_files(dest, package) if p not in own]
    added, changed = [], []
    with tempfile.TemporaryDirectory() as rendered:
        files = render(rendered, package, op_prefix)
        for path in files:
            source = os.path.join(rendered, path)
            target = os.path.join(dest, path)
            mode = os.stat(source).st_mode & 0o777
            if not os.path.exists(target):
                added.append(path)
            elif (
                _read(target) != _read(source)
                or os.stat(target).st_mode & 0o777 != mode
            ):
                changed.append(path)
            else:
                continue
            _write(dest, path, _read(source), mode)
    removed = sorted(set(before) - set(files))
    if removed:
        _git(dest, "rm", "-q", "--", *removed)
    return added, changed, removed, _table_notes(dest, theirs, package, op_prefix)


def _table_notes(dest, theirs, package, op_prefix):
    """Diffs of the tables' form (theirs emptied against ours emptied): an
    update leaves the tables alone, so a new table or import is merged by
    hand."""
    paths = machinery.machinery_files(_ROOT)
    ours = _tables(_ROOT, machinery.PACKAGE, package, op_prefix, paths)
    current = _tables(dest, package, package, op_prefix, theirs.machinery_files(dest))
    notes = []
    for path, data in ours.items():
        if current[path] != data:
            notes.append(
                "".join(
                    difflib.unified_diff(
                        current[path].decode().splitlines(keepends=True),
                        data.decode().splitlines(keepends=True),
                        f"{path} (yours, rows left out)",
                        f"{path} (the machinery's)",
                    )
                )
            )
    return notes


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2],
    )
    parser.add_argument("dest", help="the repository to create (or to update)")
    parser.add_argument("--package", help="the Python package, snake_case")
    parser.add_argument(
        "--op-prefix", help="the ops' name prefix (default: PACKAGE in CamelCase)"
    )
    parser.add_argument(
        "--op", default="scale", help="the example op, snake_case (default: scale)"
    )
    parser.add_argument(
        "--skip-compat",
        action="store_true",
        help="do not record the example op's spec history and goldens (no Bazel)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="refresh DEST's machinery from this repository",
    )
    args = parser.parse_args(argv)
    dest = os.path.abspath(args.dest)
    try:
        if args.update:
            if args.package or args.op_prefix:
                raise RepoError("--update reads the package and prefix from DEST")
            report(dest, *update(dest))
            return
        if not args.package:
            raise RepoError("--package is required")
        check_package(args.package)
        op_prefix = args.op_prefix or camel_case(args.package)
        try:
            machinery.check_op_prefix(op_prefix)
            new_op.check_name(args.op, "--op")
        except (ValueError, new_op.ScaffoldError) as e:
            raise RepoError(str(e)) from None
        _check_dest(dest)
        _check_git_identity()
    except RepoError as e:
        sys.exit(f"new_repo: {e}")
    try:
        create(dest, args.package, op_prefix, args.op, args.skip_compat)
    except subprocess.CalledProcessError as e:
        sys.exit(
            f"new_repo: {' '.join(e.cmd)} failed in {dest} (exit {e.returncode}); "
            "what was written before it is there, committed if the commit ran"
        )
    op = f"{op_prefix}>{camel_case(args.op)}"
    print(
        f"new_repo: {dest} holds package {args.package} with {op}, in two "
        "commits. Next:\n"
        f"  cd {dest}\n"
        "  tools/test.sh                      # bazel test //...\n"
        "  tools/build_wheel.sh --releases 2.16   # the wheel, into dist/\n"
        "  python3 tools/new_op.py NAME       # your next op"
    )


def report(dest, added, changed, removed, notes):
    if not (added or changed or removed or notes):
        print(f"new_repo: {dest}'s machinery is up to date")
        return
    for word, paths in (("added", added), ("changed", changed), ("removed", removed)):
        for path in paths:
            print(word, path)
    for note in notes:
        print(
            "The tables' form changed; your tables are left as they are, "
            "merge by hand:\n" + note
        )
    if added or changed or removed:
        print(
            f"new_repo: {len(added)} added, {len(changed)} changed, "
            f"{len(removed)} removed in {dest}: review (git diff) and commit"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
