"""CustomOps>CheckNumericsN: tf.debugging.check_numerics for a list of tensors
in one op, and its pass-through gradient."""

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.op_specs import tensor_list

_ops = load_library.load_op_library()


def check_numerics_n(tensors, message, name=None):
    """Returns `tensors` unchanged, or fails if any holds NaN or Inf.

    Args:
      tensors: A non-empty list of floating-point `Tensor`s (`float16`,
        `bfloat16`, `float32`, `float64`), whose dtypes may differ.
      message: A string included in the error.
      name: A name for the operation (optional).

    Returns:
      The list of tensors, unchanged. Use the returned tensors (not the
      inputs) downstream so that the check runs before they are used.

    Raises:
      TypeError: if `tensors` is not a list of floating-point tensors, or
        `message` is not a string.
      ValueError: if `tensors` is empty.
      InvalidArgumentError: naming `message`, the index of the first tensor
        holding NaN or Inf, and which of them it holds.

    Example:

    >>> x, y = tfco.check_numerics_n([[1.0], tf.constant([2.0], tf.float64)], "ok")
    >>> y
    <tf.Tensor: shape=(1,), dtype=float64, numpy=array([2.])>
    >>> try:
    ...     tfco.check_numerics_n([[1.0], [float("inf")]], "after layer 3")
    ... except tf.errors.InvalidArgumentError as e:
    ...     print("after layer 3: CheckNumericsN found Inf in tensors[1]" in e.message)
    True
    """
    if not isinstance(message, str):
        raise TypeError(
            f"check_numerics_n: message must be a string, got {type(message).__name__}"
        )
    tensors = tensor_list(
        tensors, "CustomOps>CheckNumericsN", "check_numerics_n", "tensors"
    )
    return _ops.custom_ops_check_numerics_n(tensors=tensors, message=message, name=name)


@tf.RegisterGradient("CustomOps>CheckNumericsN")
def _check_numerics_n_grad(op, *grads):
    """The op is the identity on the values it lets through."""
    del op  # The gradient does not depend on the inputs.
    return list(grads)
