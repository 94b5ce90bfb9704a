"""ZeroOut's smoke checks: the op, and the op compiled with XLA (its HLO
lowering)."""

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.platform.smoke_util import close, require_xla


def zero_out():
    close(tfco.zero_out([[1, 2], [3, 4]]), [[1, 0], [0, 0]])


def zero_out_jit_compile():
    require_xla()
    compiled = tf.function(lambda x: tfco.zero_out(x, keep=1), jit_compile=True)
    close(compiled(tf.ones([3])), [1, 0, 0])


CHECKS = [zero_out, zero_out_jit_compile]
