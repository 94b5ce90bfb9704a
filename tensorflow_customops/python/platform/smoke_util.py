"""What the families' smoke checks (python/ops/<family>_smoke.py) share."""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco


class Skipped(Exception):
    """A check that cannot run here; not counted."""


def require_xla():
    """Skips a jit check where this copy has no XLA lowerings."""
    info = tfco.build_info()
    if not info["xla"]:
        raise Skipped(f"no XLA lowerings: {info['xla_unavailable_reason']}")


def close(actual, expected, tol=1e-6):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=tol, atol=tol)


def max_gradient_error(fn, x):
    """The largest difference of fn's Jacobian at x from a numeric one."""
    theoretical, numeric = tf.test.compute_gradient(fn, [x])
    return max(np.max(np.abs(t - n)) for t, n in zip(theoretical, numeric))
