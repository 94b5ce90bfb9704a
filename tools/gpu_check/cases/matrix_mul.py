"""MatrixMul's cases, in every transpose case."""

import numpy as np

from tools.gpu_check.cases import FLOAT_DTYPES, case, normal, ops

# --- MatrixMul.


def cases():
    cases = []
    shapes = [("odd", 37, 53, 29), ("wide", 5, 200, 67)]
    for dtype in FLOAT_DTYPES:
        for label, m, k, n in shapes + (
            [("empty_inner", 17, 0, 9)] if dtype == "float32" else []
        ):
            for transpose_a in (False, True):
                for transpose_b in (False, True):
                    rng = np.random.default_rng(m * k * n)
                    a = normal(rng, (k, m) if transpose_a else (m, k), dtype)
                    b = normal(rng, (n, k) if transpose_b else (k, n), dtype)
                    product = ops.custom_ops_matrix_mul(
                        a, b, transpose_a=transpose_a, transpose_b=transpose_b
                    )
                    flags = f"ta{int(transpose_a)}_tb{int(transpose_b)}"
                    name = f"matrix_mul/{dtype}/{label}/{flags}"
                    cases.append(
                        case(
                            name,
                            "MatrixMul",
                            {"transpose_a": transpose_a, "transpose_b": transpose_b},
                            {"a": (a, dtype), "b": (b, dtype)},
                            {"product": (product, dtype)},
                            "sum",
                            dtype,
                        )
                    )
    return cases
