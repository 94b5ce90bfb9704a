"""Keras layers over the custom ops."""


def type_spec(value):
    """The TypeSpec of a layer's or a model's input: of a tensor, or of a
    Keras symbolic tensor, whose ragged ones (Keras 2's type_spec, Keras 3's
    ragged flags) stay ragged."""
    import tensorflow as tf

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
