"""CustomOps>ClipByGlobalNorm: tf.clip_by_global_norm in one op, and its
gradient."""

import tensorflow as tf

from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()


def clip_by_global_norm(t_list, clip_norm, name=None):
    """Scales tensors so that their global L2 norm is at most `clip_norm`.

    Gives the values of `tf.clip_by_global_norm` with one op instead of a few
    per tensor: the global norm is `sqrt(sum(sum(t ** 2) for t in t_list))`,
    and every tensor is multiplied by
    `clip_norm * min(1 / global_norm, 1 / clip_norm)`. If the global norm is
    inf or NaN, every output element is NaN, as with `tf.clip_by_global_norm`.
    The sum of squares is accumulated in double, so it does not overflow
    where TensorFlow's float16 or float32 sum does, and it is added in a fixed
    order: the same bits for any number of threads.

    Args:
      t_list: A non-empty list of `Tensor`s of one type: `float16`,
        `bfloat16`, `float32` or `float64`, of any shapes.
      clip_norm: A scalar, converted to the dtype of `t_list`. Values `<= 0`
        behave as in `tf.clip_by_global_norm`.
      name: A name for the operation (optional).

    Returns:
      A pair `(clipped, global_norm)`: the list of scaled tensors, and the
      scalar global norm of `t_list` before clipping.

    Raises:
      ValueError: if `t_list` is empty.
      InvalidArgumentError: if `clip_norm` is not a scalar.

    Example:

    >>> clipped, norm = tfco.clip_by_global_norm([[3.0], [4.0]], 1.0)
    >>> norm
    <tf.Tensor: shape=(), dtype=float32, numpy=5.0>
    >>> clipped[1]
    <tf.Tensor: shape=(1,), dtype=float32, numpy=array([0.8], dtype=float32)>
    """
    if not t_list:
        raise ValueError("clip_by_global_norm: t_list must not be empty")
    t_list = [tf.convert_to_tensor(t) for t in t_list]
    clip_norm = tf.convert_to_tensor(clip_norm, dtype=t_list[0].dtype)
    clipped, global_norm = _ops.custom_ops_clip_by_global_norm(
        t=t_list, clip_norm=clip_norm, name=name
    )
    return clipped, global_norm


@tf.RegisterGradient("CustomOps>ClipByGlobalNorm")
def _clip_by_global_norm_grad(op, *grads):
    """Both gradients come from the fused gradient op (see
    core/kernels/clip_by_global_norm_op.h for the formulas)."""
    n = op.get_attr("N")
    dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
        t=op.inputs[:n],
        clip_norm=op.inputs[n],
        dclipped=grads[:n],
        dglobal_norm=grads[n],
    )
    return list(dt) + [dclip_norm]


tf.no_gradient("CustomOps>ClipByGlobalNormGrad")
