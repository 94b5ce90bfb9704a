"""What the op specs allow, read from the loaded library: the wrappers check
their arguments against the specs instead of a copy of them."""

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
