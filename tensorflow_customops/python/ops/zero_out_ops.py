"""CustomOps>ZeroOut: TensorFlow's tutorial op, with its gradient."""

import numbers

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.op_specs import allowed_dtypes, typed_tensor

_ops = load_library.load_op_library()
_DTYPES = allowed_dtypes("CustomOps>ZeroOut")


def zero_out(to_zero, keep=1, name=None):
    """Keeps the first `keep` elements of a tensor and zeroes the rest.

    Elements are counted in row-major order: the first is the one at index
    `[0, 0, ..., 0]`.

    Args:
      to_zero: A `Tensor` (or anything convertible to one) of type `int32`,
        `int64`, `int8`, `uint8`, `float16`, `bfloat16`, `float32` or
        `float64`, of any shape.
      keep: A Python int (the op's attribute): how many leading elements to
        keep, at least 0 (default 1). More than the size of `to_zero` keeps
        every element.
      name: A name for the operation (optional).

    Returns:
      A `Tensor` with the shape and dtype of `to_zero`.

    Raises:
      TypeError: if `to_zero` is of another type, or `keep` is not an int.
      ValueError: if `keep` is 2**63 or more.
      InvalidArgumentError: if `keep` is negative (the kernel's check).

    Example:

    >>> tfco.zero_out([[1, 2], [3, 4]])
    <tf.Tensor: shape=(2, 2), dtype=int32, numpy=
    array([[1, 0],
           [0, 0]], dtype=int32)>
    """
    to_zero = typed_tensor(to_zero, "to_zero", _DTYPES)
    return _ops.custom_ops_zero_out(to_zero=to_zero, keep=_check_keep(keep), name=name)


def _check_keep(keep):
    # A float would be truncated by the attr, and a tensor is accepted
    # eagerly only; bool is an Integral, but True is no count.
    if isinstance(keep, bool) or not isinstance(keep, numbers.Integral):
        raise TypeError(
            "keep must be a Python int (it sets the op's attribute, so it cannot "
            f"be a tensor), got {keep!r}"
        )
    if keep >= 2**63:
        raise ValueError(f"keep must be below 2**63, got {keep}")
    return int(keep)


@tf.RegisterGradient("CustomOps>ZeroOut")
def _zero_out_grad(op, grad):
    """Only the kept elements pass their gradient through: ZeroOut(grad)."""
    # The gradient depends on keep, not on the input values.
    return [_ops.custom_ops_zero_out(grad, keep=op.get_attr("keep"))]
