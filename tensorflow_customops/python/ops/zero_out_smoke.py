"""ZeroOut's smoke check."""

import tensorflow_customops as tfco
from tensorflow_customops.python.platform.smoke_util import close


def zero_out():
    close(tfco.zero_out([[1, 2], [3, 4]]), [[1, 0], [0, 0]])


CHECKS = [zero_out]
