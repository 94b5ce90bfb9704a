"""Records the golden GraphDefs of every op version that has none yet.

    bazel run //tensorflow_customops/core/ops/compat:record_goldens

Goldens are immutable: an existing one is never rewritten, so a spec change
gets new goldens only through a new history version
(bazel run //tensorflow_customops/core/ops/compat:update_ops_history). Writes under
tensorflow_customops/core/ops/compat/testdata/<op>/, with the op's SHA256SUMS.
"""

import os
import sys

from tensorflow_customops.core.ops.compat import goldens
from tensorflow_customops.python.ops import load_library


def main():
    os.chdir(os.environ.get("BUILD_WORKSPACE_DIRECTORY", "."))
    history = goldens.read_history()
    registered = {
        op.name
        for op in load_library.op_list().op
        if op.name.startswith(goldens.PREFIX)
    }
    missing = sorted(registered - set(history))
    if missing:
        sys.exit(
            f"no history for op {', '.join(missing)}; "
            f"run {goldens.UPDATE_COMMAND} first"
        )
    manifest = goldens.read_manifest()
    recorded = 0
    for name, versions in sorted(history.items()):
        new = False
        for version, op_def in enumerate(versions, start=1):
            paths = goldens.golden_paths(name, version)
            if any(os.path.exists(p) for p in paths):
                continue
            os.makedirs(os.path.dirname(paths[0]), exist_ok=True)
            for path, text in zip(paths, goldens.record(op_def, version)):
                with open(path, "w") as f:
                    f.write(text)
                manifest[os.path.relpath(path, goldens.TESTDATA_DIR)] = (
                    goldens.file_digest(path)
                )
            print(f"recorded {name} version {version}: {paths[0]}")
            recorded += 1
            new = True
        if new:
            goldens.write_manifest(goldens.file_stem(name), manifest)
    print(f"{recorded} new golden(s); existing goldens left untouched")


if __name__ == "__main__":
    main()
