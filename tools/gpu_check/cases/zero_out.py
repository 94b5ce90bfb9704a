"""ZeroOut's cases."""

import numpy as np
import tensorflow as tf

from tools.gpu_check.cases import TF_DTYPES, case, ops

# --- ZeroOut.

ZERO_OUT_DTYPES = (
    "int64",
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
)


def cases():
    cases = []
    for dtype in ZERO_OUT_DTYPES:
        rng = np.random.default_rng(len(cases))
        x = tf.cast(rng.integers(-100, 100, size=(3, 2221)), TF_DTYPES[dtype])
        for keep in (0, 1, 12345, 10**9):
            y = ops.custom_ops_zero_out(x, keep=keep)
            cases.append(
                case(
                    f"zero_out/{dtype}/keep{keep}",
                    "ZeroOut",
                    {"keep": keep},
                    {"x": (x, dtype)},
                    {"y": (y, dtype)},
                    "exact",
                    dtype,
                )
            )
    return cases
