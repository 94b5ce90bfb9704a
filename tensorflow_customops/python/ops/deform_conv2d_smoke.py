"""DeformableConv2d's smoke check: tf.nn.conv2d at zero offsets and a unit
mask, and the gradients of all four inputs against numeric ones."""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.platform.smoke_util import close, max_gradient_error

# A 6 x 7 map of 4 channels, two images, of distinct values.
_FEATURES = np.random.default_rng(0).permutation(2 * 6 * 7 * 4).reshape(2, 6, 7, 4) / 50


def deform_conv2d_and_gradients():
    # Zero offsets and a unit mask give tf.nn.conv2d; at offsets between
    # whole pixels, the gradients of all four inputs match numeric ones.
    rng = np.random.default_rng(1)
    filters = rng.normal(size=(3, 3, 4, 2))
    zeros, ones = np.zeros((2, 4, 5, 18)), np.ones((2, 4, 5, 9))
    got = tfco.deform_conv2d(_FEATURES, zeros, filters, mask=ones)
    close(got, tf.nn.conv2d(_FEATURES, filters, 1, "VALID"), 1e-12)
    args = [
        _FEATURES,
        rng.uniform(-1.4, 1.4, size=zeros.shape),
        filters,
        rng.uniform(size=ones.shape),
    ]
    for index in range(4):

        def fn(t, index=index):
            x, offset, filt, mask = [t if i == index else a for i, a in enumerate(args)]
            return tfco.deform_conv2d(x, offset, filt, mask=mask)

        error = max_gradient_error(fn, args[index])
        assert error < 1e-6, (index, error)


CHECKS = [deform_conv2d_and_gradients]
