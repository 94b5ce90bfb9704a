"""ClipByGlobalNorm's smoke check: the clipped tensors, the norm and the
gradient."""

import numpy as np

import tensorflow_customops as tfco
from tensorflow_customops.python.platform.smoke_util import close, max_gradient_error


def clip_by_global_norm_and_gradient():
    t = [np.array([3.0, 4.0]), np.array([[12.0]])]
    clipped, norm = tfco.clip_by_global_norm(t, 6.5)
    close(norm, 13.0)
    close(clipped[0], [1.5, 2.0])
    error = max_gradient_error(
        lambda x: tfco.clip_by_global_norm([x, t[1]], 6.5)[0][0], t[0]
    )
    assert error < 1e-8, error


CHECKS = [clip_by_global_norm_and_gradient]
