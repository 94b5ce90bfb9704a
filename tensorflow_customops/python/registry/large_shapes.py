"""Helpers of the large-shape checks: sizes beyond 2^31 elements and beyond
int64, checked at the shape level without allocating them."""

import tensorflow as tf

# Static dims far beyond int32. TensorFlow rejects a placeholder whose known
# dims multiply beyond int64, so specs stay below that and the overflow comes
# from what the ops compute.
BIG = 2**40
MEGA = 2**20
# Two of these overflow int64 (2^124 elements), yet each is a valid dim.
HUGE = 2**62
INT32_MAX = 2**31 - 1


def traced_shapes(fn, *specs):
    """The static shapes of fn's outputs when traced on `specs`."""
    outputs = tf.function(fn).get_concrete_function(*specs).structured_outputs
    return [t.shape.as_list() for t in tf.nest.flatten(outputs)]


def huge_empty(dtype=tf.float32):
    """A valid tensor of shape [0, 2^62, 2^62]: no element, no memory."""
    return tf.zeros([0, HUGE, HUGE], dtype)
