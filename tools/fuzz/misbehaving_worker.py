"""A fuzz worker that crashes on case 1 and hangs on case 3 of every op, so
that fuzz_harness_test can check that the harness catches both."""

import os
import time

from tools.fuzz import case_runner

CRASHING_CASE = 1
HANGING_CASE = 3


def _run(op_defs, case):
    if case.index == CRASHING_CASE:
        os.abort()
    if case.index == HANGING_CASE:
        time.sleep(3600)
    return case_runner.run_case(op_defs, case)


if __name__ == "__main__":
    case_runner.serve(_run)
