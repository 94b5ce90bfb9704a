"""CustomOps>CheckCondition: a run-time check that raises under XLA too,
where a Python `Assert` is dropped, and its pass-through gradient."""

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.op_specs import tensor_list

_ops = load_library.load_op_library()


def check_condition(condition, values, message, name=None):
    """Returns `values` unchanged, or fails with `message` if `condition` is
    false.

    `tf.debugging.Assert` for code that may be compiled: XLA drops an
    `Assert` ("Ignoring Assert operator" in the log), and control
    dependencies on one. This check is a stateful op whose outputs are
    `values`, so it runs before whatever reads them, and a graph cannot
    prune it. Under `jit_compile`, a condition XLA knows when it compiles
    (computed from static shapes, say) fails the compilation with the same
    error on every device; otherwise the check runs in the compiled program
    on the CPU (TensorFlow 2.12 to 2.19 raise it as an `InternalError`
    "CustomCall failed: <message>"), and on a GPU, or with
    `TFCO_XLA_LOWERING=hlo`, where a compiled program cannot raise, the
    values pass through unchecked (docs/xla.md).

    Args:
      condition: A `bool` `Tensor`, usually a scalar: the check holds where
        every element is true.
      values: A non-empty list of `Tensor`s of any numeric or bool dtypes,
        passed through.
      message: A string, the error's text.
      name: A name for the operation (optional).

    Returns:
      The list of `values`, unchanged. Use these (not the inputs)
      downstream, so that what reads them runs after the check.

    Raises:
      TypeError: `condition` is not bool, `values` is not a list of numeric
        or bool tensors, or `message` is not a string.
      ValueError: `values` is empty.
      InvalidArgumentError: with `message`, where `condition` is false.

    Example:

    >>> x = tf.constant([1.0, 4.0])
    >>> (y,) = tfco.check_condition(tf.reduce_all(x > 0), [x], "x must be positive")
    >>> y
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 4.], dtype=float32)>
    >>> try:
    ...     tfco.check_condition(tf.reduce_all(-x > 0), [x], "x must be negative")
    ... except tf.errors.InvalidArgumentError as e:
    ...     print("x must be negative" in e.message)
    True
    """
    if not isinstance(message, str):
        raise TypeError(
            f"check_condition: message must be a string, got {type(message).__name__}"
        )
    condition = tf.convert_to_tensor(condition)
    if condition.dtype != tf.bool:
        raise TypeError(
            f"check_condition: condition must be bool, got {condition.dtype.name}"
        )
    tensors = tensor_list(
        values,
        "CustomOps>CheckCondition",
        "check_condition",
        "values",
        expected="numeric or bool",
    )
    return _ops.custom_ops_check_condition(
        condition=condition, values=tensors, message=message, name=name
    )


@tf.RegisterGradient("CustomOps>CheckCondition")
def _check_condition_grad(op, *grads):
    """The op is the identity on the values it lets through; the condition is
    bool and has none."""
    del op  # The gradient does not depend on the inputs.
    return [None] + list(grads)
