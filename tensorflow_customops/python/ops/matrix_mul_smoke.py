"""MatrixMul's smoke check: the product and its gradient."""

import numpy as np

import tensorflow_customops as tfco
from tensorflow_customops.python.platform.smoke_util import close, max_gradient_error


def matrix_mul_and_gradient():
    a = np.random.default_rng(1).standard_normal((3, 4))
    b = np.random.default_rng(2).standard_normal((5, 4))
    close(tfco.matrix_mul(a, b, transpose_b=True), a @ b.T, 1e-12)
    error = max_gradient_error(lambda x: tfco.matrix_mul(x, b, transpose_b=True), a)
    assert error < 1e-8, error


CHECKS = [matrix_mul_and_gradient]
