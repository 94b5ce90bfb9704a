"""Finds references to the repository's documents that lead nowhere.

A comment, docstring or document names a document by its path
(`docs/gpu.md`, `CONTRIBUTING.md`, `README.md`), optionally with a section,
as `docs/gpu.md, "Races"`, `CONTRIBUTING.md ("Layers")` or `docs/gpu.md#races`,
and Markdown links name one relative to their own file (`[xla](xla.md#semantics)`,
`[Runs](#runs)`). Each must name a tracked file, and each section one of its
headings. tools/new_repo.py copies the machinery into repositories that lack
this library's documents, so doc_refs_test runs this over both.

    python3 tools/doc_refs.py [ROOT]   # prints each dangling reference
"""

import os
import re
import subprocess
import sys

# A document named in prose, then an optional section: `#anchor`, or a quoted
# heading after a comma, a space or an opening parenthesis.
_PROSE = re.compile(
    r"(?<![\w/.])((?:\.\./)*(?:docs/[\w-]+\.md|CONTRIBUTING\.md|README\.md))"
    r"(?:#([\w-]+)|,? \(?([\"'])([^\"'\n]+)\3)?"
)
# A Markdown link to a document (relative to the linking file) or an anchor.
_LINK = re.compile(r"\]\(((?:[\w./-]+\.md)?)(?:#([\w-]+))?\)")
_HEADING = re.compile(r"^#{1,6} +(.*?) *$", re.M)
# Comment and docstring markers that a wrapped reference continues after.
_CONTINUATION = re.compile(r"\n[ \t]*(?:#+|//+|\*|\"\"\")?[ \t]*")
_TEXT = (".md", ".py", ".sh", ".cc", ".h", ".bzl", ".txt", ".tmpl", ".in")
_NAMED = ("BUILD", "WORKSPACE", ".bazelrc", "run")


def anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped,
    spaces as dashes."""
    text = heading.replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _fenced_out(text):
    """A Markdown document without its fenced code, whose `#` lines are no
    headings."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def dangling(root):
    """(file, reference, why) for every reference under ROOT's tracked files
    that names no tracked document or no heading of it."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.decode()
    files = [p for p in tracked.split("\0") if p]
    present = {p for p in files if os.path.exists(os.path.join(root, p))}
    headings = {}

    def sections(path):
        if path not in headings:
            with open(os.path.join(root, path), errors="replace") as f:
                found = _HEADING.findall(_fenced_out(f.read()))
            headings[path] = (set(found), {anchor(h) for h in found})
        return headings[path]

    def check(source, path, shown, section=None, slug=None):
        path = os.path.normpath(path)
        if path not in present:
            return [(source, shown, "no such file")]
        names, slugs = sections(path)
        if section is not None and " ".join(section.split()) not in names:
            return [(source, shown, f'{path} has no heading "{section}"')]
        if slug is not None and slug not in slugs:
            return [(source, shown, f"{path} has no heading #{slug}")]
        return []

    found = []
    for source in sorted(present):
        if not (source.endswith(_TEXT) or os.path.basename(source) in _NAMED):
            continue
        with open(os.path.join(root, source), errors="replace") as f:
            text = f.read()
        joined = _CONTINUATION.sub(" ", text)
        for m in _PROSE.finditer(joined):
            path = re.sub(r"^(\.\./)+", "", m.group(1))
            # A one-letter name stands for any (CONTRIBUTING's family `f`).
            if len(os.path.basename(path)) == len("f.md"):
                continue
            found += check(source, path, m.group(0), m.group(4), m.group(2))
        # A template's links are checked where it is rendered.
        if source.endswith(".md"):
            for m in _LINK.finditer(_fenced_out(text)):
                target = m.group(1)
                if target:
                    path = os.path.join(os.path.dirname(source), target)
                else:
                    path = source
                found += check(source, path, m.group(0), slug=m.group(2))
    return found


def main(argv):
    root = argv[1] if len(argv) > 1 else os.getcwd()
    found = dangling(root)
    for source, shown, why in found:
        print(f"{source}: {shown!r}: {why}")
    print(f"{len(found)} dangling")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
