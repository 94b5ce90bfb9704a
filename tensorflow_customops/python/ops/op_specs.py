"""What the op specs allow, read from the loaded library: the wrappers check
their arguments against the specs instead of a copy of them."""

import collections.abc

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from tensorflow_customops.python.ops import load_library


def allowed_dtypes(op_name, attr="T"):
    """The dtypes that op `op_name`'s spec allows for its type attribute
    `attr`, in the spec's order."""
    load_library.load_op_library()
    op_def = op_def_registry.get(op_name)
    if op_def is None:
        raise LookupError(f"the op library registers no op {op_name}")
    for attr_def in op_def.attr:
        if attr_def.name == attr:
            return tuple(tf.as_dtype(t) for t in attr_def.allowed_values.list.type)
    raise LookupError(f"{op_name} has no attribute {attr}")


def dtype_names(dtypes, last="or"):
    """The dtypes' names for an error message: `float16, float32 or float64`."""
    names = [dtype.name for dtype in dtypes]
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if names[1:] else names[0]


def tensor_list(values, op_name, function, arg, expected=None):
    """`values`, a non-empty list (or tuple) of tensors or what converts to
    them, each of a dtype op `op_name`'s spec allows for `T`, as a list of
    tensors; else a TypeError or ValueError naming `function` and `arg` (or
    `arg[i]`). `expected` words the dtypes in errors (default: their names)."""
    if isinstance(values, (str, bytes)) or not isinstance(
        values, collections.abc.Sequence
    ):
        raise TypeError(
            f"{function}: {arg} must be a list of tensors, got "
            f"{type(values).__name__} (wrap a single tensor as [t])"
        )
    if not values:
        raise ValueError(f"{function}: {arg} must not be empty")
    dtypes = allowed_dtypes(op_name)
    tensors = []
    for i, value in enumerate(values):
        try:
            tensor = tf.convert_to_tensor(value)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"{function}: {arg}[{i}] must be a tensor: {error}"
            ) from None
        if tensor.dtype not in dtypes:
            raise TypeError(
                f"{function}: {arg}[{i}] must be {expected or dtype_names(dtypes)}, "
                f"got {tensor.dtype.name}"
            )
        tensors.append(tensor)
    return tensors


def typed_tensor(value, arg, dtypes, like=None):
    """`value` as a tensor of one of `dtypes`, or of the dtype of `like`, a
    (name, dtype) pair of an argument converted before (Python numbers take
    it); else a TypeError naming `arg`."""
    if value is None:
        raise TypeError(f"{arg} must be a tensor, got None")
    like_arg, like_dtype = like or (None, None)
    tensor = tf.convert_to_tensor(value, dtype_hint=like_dtype)
    got = tensor.dtype.name
    if tensor.dtype not in dtypes:
        raise TypeError(f"{arg} must be {dtype_names(dtypes)}, got {got}")
    if like_dtype is not None and tensor.dtype != like_dtype:
        raise TypeError(
            f"{arg} must have {like_arg}'s dtype, {like_dtype.name}, got {got}"
        )
    return tensor
