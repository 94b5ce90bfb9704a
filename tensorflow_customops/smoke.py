"""Smoke test of an installed tensorflow_customops, for any Python and
TensorFlow it installs next to: the checks of every op family, in
python/ops/<family>_smoke.py (CHECKS): its ops forward against a reference
and their gradients against numeric differences, and what else the family's
users rely on (a jit compilation, a SavedModel round trip, Keras, an ONNX
export where its packages are installed).

Run it with the interpreter of the environment the wheel is installed in,
from outside the source tree:

    python -m tensorflow_customops.smoke

It prints one line per check (SKIPPED for one that cannot run there), then
`N passed, N failed`, and exits 1 if a check failed or there was none.
"""

import importlib
import os
import pkgutil
import sys
import traceback

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python import ops as _ops_package
from tensorflow_customops.python.platform.smoke_util import Skipped


def checks():
    """Every family's checks, by module name."""
    found = []
    for module in sorted(m.name for m in pkgutil.iter_modules(_ops_package.__path__)):
        if module.endswith("_smoke"):
            name = f"{_ops_package.__name__}.{module}"
            found += importlib.import_module(name).CHECKS
    return found


def main():
    print(
        f"Python {sys.version.split()[0]}, TensorFlow {tf.__version__}, "
        f"tensorflow_customops {tfco.__version__} from {os.path.dirname(tfco.__file__)}"
    )
    print(tfco.build_info())
    passed = failed = 0
    for fn in checks():
        try:
            fn()
        except Skipped as e:
            print(f"SKIPPED {fn.__name__}: {e}")
            continue
        except Exception:  # noqa: BLE001 - every failure is reported and counted
            failed += 1
            print(f"FAILED {fn.__name__}\n{traceback.format_exc()}")
        else:
            passed += 1
            print(f"PASSED {fn.__name__}")
    print(f"{passed} passed, {failed} failed")
    if not passed + failed:
        print("no check ran: the op families have no python/ops/*_smoke.py")
    return 1 if failed or not passed + failed else 0


if __name__ == "__main__":
    sys.exit(main())
