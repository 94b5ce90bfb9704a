"""Helpers for gradient tests: the C++ gradient through SymbolicGradient."""

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2


def symbolic_gradient(op, grad_ys):
    """Runs the C++ (REGISTER_OP_GRADIENT) gradient of graph op `op`.

    SymbolicGradient instantiates the gradient function registered for
    `op.type` with `op`'s attrs (defaults included) and feeds it `op`'s inputs
    and `grad_ys`, one per output of `op`. It only works while building a
    graph (tf.compat.v1): in TF2 eager mode and inside tf.function it cannot
    see the forward op's attrs.

    Returns:
      One gradient tensor per input of `op`.
    """
    f = attr_value_pb2.NameAttrList(name=op.type)
    for key, value in op.node_def.attr.items():
        f.attr[key].CopyFrom(value)
    return tf.raw_ops.SymbolicGradient(
        input=list(op.inputs) + list(grad_ys),
        Tout=[t.dtype for t in op.inputs],
        f=f,
    )
