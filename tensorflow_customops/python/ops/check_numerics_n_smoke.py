"""CheckNumericsN's smoke check: finite tensors pass, a NaN is reported."""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco


def check_numerics_n():
    tfco.check_numerics_n([tf.ones([2])], "fine")
    try:
        tfco.check_numerics_n([tf.constant([1.0, np.nan])], "smoke")
    except tf.errors.InvalidArgumentError as e:
        assert "smoke" in str(e) and "NaN" in str(e), e
    else:
        raise AssertionError("NaN not reported")


CHECKS = [check_numerics_n]
