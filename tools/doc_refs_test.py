"""Every reference to a document or one of its headings, in this repository's
tracked files, leads somewhere (tools/doc_refs.py); and the finder itself
finds what it should in a repository made up for it. new_repo_test runs the
same over a generated repository.

It reads the source tree through its own runfile (tagged `local`)."""

import os
import subprocess
import sys
import tempfile
import unittest

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, _ROOT)

from tools import doc_refs  # noqa: E402

# A made-up repository. The names of documents are fields filled when it is
# written, so that this file cites none itself.
_FILES = {
    "README.md": "# Title\n\n## `tfco.f(x, y)`\n\n"
    "See [g]({docs}/guide.md#two-words).\n",
    "{docs}/guide.md": "# G\n\n## Two words\n\n```sh\n# not a heading\n```\n"
    "Back to [top](#g), [gone](#not-a-heading), [none](../NONE.md).\n",
    "lib/a.py": (
        '"""Wrapped: {docs}/guide.md, "Two\n'
        'words"; anchored: {readme}#tfcofx-y and {docs}/guide.md#two-words."""\n'
        "# A family `f` stands for any: {docs}/f.md.\n"
        '# {docs}/guide.md ("No such heading"), {docs}/missing.md, {contributing}.\n'
    ),
}
_NAMES = {"docs": "docs", "readme": "README.md", "contributing": "CONTRIBUTING.md"}
_GUIDE = "{docs}/guide.md".format(**_NAMES)


class DocRefsTest(unittest.TestCase):
    def test_this_repository(self):
        found = doc_refs.dangling(_ROOT)
        self.assertEqual(
            found,
            [],
            "references to documents or headings that are not there: fix the "
            "reference, or the heading it names",
        )

    def test_finds_what_leads_nowhere(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as root:
            for path, text in _FILES.items():
                path = path.format(**_NAMES)
                os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text.format(**_NAMES))
            subprocess.run(["git", "init", "-q"], cwd=root, check=True)
            subprocess.run(["git", "add", "-A"], cwd=root, check=True)
            found = [(source, why) for source, _, why in doc_refs.dangling(root)]
        self.assertEqual(
            found,
            [
                (_GUIDE, f"{_GUIDE} has no heading #not-a-heading"),
                (_GUIDE, "no such file"),
                ("lib/a.py", f'{_GUIDE} has no heading "No such heading"'),
                ("lib/a.py", "no such file"),
                ("lib/a.py", "no such file"),
            ],
        )


if __name__ == "__main__":
    unittest.main()
