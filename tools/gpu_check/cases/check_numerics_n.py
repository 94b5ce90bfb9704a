"""CheckNumericsN's cases."""

import numpy as np
import tensorflow as tf

from tools.gpu_check.cases import FLOAT_DTYPES, TF_DTYPES, case, ops

# --- CheckNumericsN: the functor's per-tensor flags (1 NaN, 2 Inf).


def _cpu_flags(x):
    """The flags the CPU kernel found in x, read from its error message."""
    try:
        ops.custom_ops_check_numerics_n([x], message="gpu_check")
    except tf.errors.InvalidArgumentError as e:
        found = e.message.split("found ", 1)[1].split(" in tensors", 1)[0]
        return {"NaN": 1, "Inf": 2, "NaN and Inf": 3}[found]
    return 0


def cases():
    cases = []
    for dtype in FLOAT_DTYPES:
        rng = np.random.default_rng(len(cases))
        # A NaN at the end of a tensor that takes several grid-stride passes
        # (odd, so the last pass is partial).
        large = 300001
        plants = [
            [],
            [(large - 1, np.nan)],
            [(0, np.inf)],
            [(5, -np.inf), (500, np.nan)],
        ]
        tensors = []
        for plant in plants:
            x = rng.standard_normal(
                large if plant and plant[0][0] == large - 1 else 1001
            )
            for index, value in plant:
                x[index] = value
            tensors.append(tf.cast(x, TF_DTYPES[dtype]))
        flags = np.array([_cpu_flags(x) for x in tensors], np.int32)
        cases.append(
            case(
                f"check_numerics_n/{dtype}",
                "CheckNumericsN",
                {"num_tensors": len(tensors)},
                {f"x{i}": (x, dtype) for i, x in enumerate(tensors)},
                {"flags": (flags, "int32")},
                "exact",
                dtype,
            )
        )
    return cases


def check_cases(test, cases):
    """Each dtype's four tensors: clean, NaN, Inf, both."""
    test.assertLen(cases, len(FLOAT_DTYPES))
    for c in cases:
        test.assertAllEqual(c.outputs["flags"].value, [0, 1, 2, 3])
