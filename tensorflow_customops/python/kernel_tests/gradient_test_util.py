"""Shared helpers for gradient tests: run an op's C++ (FunctionDefHelper)
gradient through SymbolicGradient, next to its Python gradient, and build
Jacobians from it."""

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2


def _attr_value(value):
    """An AttrValue from a Python value: DType, list of DTypes, bool, int, str."""
    if isinstance(value, attr_value_pb2.AttrValue):
        return value
    if isinstance(value, tf.DType):
        return attr_value_pb2.AttrValue(type=value.as_datatype_enum)
    if isinstance(value, (list, tuple)):
        types = [t.as_datatype_enum for t in value]
        return attr_value_pb2.AttrValue(
            list=attr_value_pb2.AttrValue.ListValue(type=types)
        )
    # bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return attr_value_pb2.AttrValue(b=value)
    if isinstance(value, int):
        return attr_value_pb2.AttrValue(i=value)
    return attr_value_pb2.AttrValue(s=value.encode())


def symbolic_gradient(op_type, inputs, grad_ys, attrs):
    """Runs the C++ gradient registered for `op_type` via SymbolicGradient.

    `attrs` maps the forward op's attr names to AttrValues or Python values.
    Only works while building a graph (tf.compat.v1): in TF2 eager mode and
    inside tf.function, SymbolicGradient cannot see the forward op's attrs.
    """
    f = attr_value_pb2.NameAttrList(name=op_type)
    for key, value in attrs.items():
        f.attr[key].CopyFrom(_attr_value(value))
    return tf.raw_ops.SymbolicGradient(
        input=list(inputs) + list(grad_ys),
        Tout=[t.dtype for t in inputs],
        f=f,
    )


def symbolic_gradient_of(op, grad_ys):
    """The C++ gradient of graph op `op` (all its attrs, defaults included) for
    upstream `grad_ys`, one per output of `op`: one tensor per input."""
    return symbolic_gradient(op.type, op.inputs, grad_ys, dict(op.node_def.attr))


def cpp_and_python_gradients(forward, op_type, x_values, dy_values, attrs, dtype):
    """Gradients of `forward(*xs)` (a tensor or list of tensors, all the
    outputs of one `op_type` op) for upstream `dy_values`, from tf.gradients
    (Python) and from SymbolicGradient (C++), as two lists of arrays."""
    with tf.Graph().as_default():
        xs = [tf.constant(v, dtype=dtype) for v in x_values]
        dys = [tf.constant(v, dtype=dtype) for v in dy_values]
        ys = tf.nest.flatten(forward(*xs))
        python_dxs = tf.gradients(ys, xs, grad_ys=dys)
        cpp_dxs = symbolic_gradient(op_type, xs, dys, attrs)
        with tf.compat.v1.Session() as sess:
            return sess.run([python_dxs, cpp_dxs])


def cpp_jacobians(op_type, x_values, y_shapes, attrs):
    """Jacobians of every output with respect to every input, from the C++
    gradient (upstream = each unit vector in turn), in float64.

    Returns `jac[k][j]`: the `[y_k.size, x_j.size]` matrix of d y_k / d x_j,
    laid out like `tf.test.compute_gradient`'s Jacobians.
    """
    with tf.Graph().as_default():
        xs = [tf.constant(v, dtype=tf.float64) for v in x_values]
        dys = [tf.compat.v1.placeholder(tf.float64, s) for s in y_shapes]
        dxs = symbolic_gradient(op_type, xs, dys, attrs)
        zeros = {dy: np.zeros(s) for dy, s in zip(dys, y_shapes)}
        jacobians = []
        with tf.compat.v1.Session() as sess:
            for dy, shape in zip(dys, y_shapes):
                size = int(np.prod(shape))
                rows = [
                    sess.run(dxs, {**zeros, dy: np.eye(size)[i].reshape(shape)})
                    for i in range(size)
                ]
                jacobians.append(
                    [np.stack([row[j].ravel() for row in rows]) for j in range(len(xs))]
                )
        return jacobians
