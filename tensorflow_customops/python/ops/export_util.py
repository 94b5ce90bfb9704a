"""What the wrappers and the layers share with the exports (SavedModel,
ONNX): the TypeSpec of an input, and the name that makes a reshape's zeros
literal in ONNX."""

import tensorflow as tf

# tf.reshape(..., name=LITERAL_ZEROS_RESHAPE) for a shape that may hold a 0
# computed at run time: ONNX's Reshape reads a 0 as "keep the input's size"
# unless allowzero is set, which tf2onnx leaves unset; the ONNX export
# (python/onnx/export.py) sets it on reshapes of this name, so that a 0 stays
# 0 as in TensorFlow.
LITERAL_ZEROS_RESHAPE = "literal_zeros_reshape"


def type_spec(value):
    """The TypeSpec of a layer's or a model's input: of a tensor, or of a
    Keras symbolic tensor, whose ragged ones (Keras 2's type_spec, Keras 3's
    ragged flags) stay ragged."""
    if isinstance(value, (tf.Tensor, tf.RaggedTensor, tf.SparseTensor)):
        return tf.type_spec_from_value(value)
    spec = getattr(value, "type_spec", None)
    if isinstance(spec, tf.RaggedTensorSpec):
        return spec
    if getattr(value, "ragged", False):
        return tf.RaggedTensorSpec(
            value.shape,
            value.dtype,
            ragged_rank=getattr(value, "ragged_rank", None) or 1,
            row_splits_dtype=getattr(value, "row_splits_dtype", None) or tf.int64,
        )
    name = getattr(value, "name", None)
    return tf.TensorSpec(
        value.shape,
        value.dtype,
        name=name.split(":")[0] if isinstance(name, str) else None,
    )
