"""CustomOps>ClipByGlobalNorm: tf.clip_by_global_norm in one op, and its
gradient."""

import collections.abc

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.op_specs import (
    allowed_dtypes,
    dtype_names,
    typed_tensor,
)

_ops = load_library.load_op_library()
_DTYPES = allowed_dtypes("CustomOps>ClipByGlobalNorm")


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
      t_list: A list of `Tensor`s of one type: `float16`, `bfloat16`,
        `float32` or `float64`, of any shapes. As in `tf.clip_by_global_norm`,
        `None` entries (variables without a gradient) are skipped and stay
        `None`, and `tf.IndexedSlices` are clipped through their values.
      clip_norm: A scalar, converted to the dtype of `t_list`. Values `<= 0`
        behave as in `tf.clip_by_global_norm`.
      name: A name for the operation (optional).

    Returns:
      A pair `(clipped, global_norm)`: the list of scaled tensors, and the
      scalar global norm of `t_list` before clipping (a float32 0 when
      `t_list` holds no tensor).

    Raises:
      TypeError: if `t_list` is not a list, or holds tensors of a type other
        than the above, or of more than one type.
      InvalidArgumentError: if `clip_norm` is not a scalar.

    Example:

    >>> clipped, norm = tfco.clip_by_global_norm([[3.0], None, [4.0]], 1.0)
    >>> norm
    <tf.Tensor: shape=(), dtype=float32, numpy=5.0>
    >>> clipped[1] is None
    True
    >>> clipped[2]
    <tf.Tensor: shape=(1,), dtype=float32, numpy=array([0.8], dtype=float32)>
    """
    if isinstance(t_list, (str, bytes)) or not isinstance(
        t_list, collections.abc.Sequence
    ):
        raise TypeError(
            "clip_by_global_norm: t_list must be a list of tensors, got "
            f"{type(t_list).__name__} (wrap a single tensor as [t])"
        )
    present = [i for i, t in enumerate(t_list) if t is not None]
    clipped = [None] * len(t_list)
    if not present:
        return clipped, tf.constant(0.0)
    values = [_dense_values(t_list[i]) for i in present]
    dtypes = {v.dtype for v in values}
    if len(dtypes) > 1 or not dtypes <= set(_DTYPES):
        names = sorted(d.name for d in dtypes)
        raise TypeError(
            "clip_by_global_norm: t_list must hold tensors of one type among "
            f"{dtype_names(_DTYPES, 'and')}, got {names}"
        )
    clip_norm = typed_tensor(
        clip_norm,
        "clip_by_global_norm: clip_norm",
        _DTYPES,
        like=("t_list", values[0].dtype),
    )
    scaled, global_norm = _ops.custom_ops_clip_by_global_norm(
        t=values, clip_norm=clip_norm, name=name
    )
    for i, value in zip(present, scaled):
        t = t_list[i]
        if isinstance(t, tf.IndexedSlices):
            value = tf.IndexedSlices(value, t.indices, t.dense_shape)
        clipped[i] = value
    return clipped, global_norm


def _dense_values(t):
    return t.values if isinstance(t, tf.IndexedSlices) else tf.convert_to_tensor(t)


@tf.RegisterGradient("CustomOps>ClipByGlobalNorm")
def _clip_by_global_norm_grad(op, *grads):
    """Both gradients come from the fused gradient op (see
    core/kernels/clip_by_global_norm/clip_by_global_norm_op.h for the formulas)."""
    n = op.get_attr("N")
    dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
        t=op.inputs[:n],
        clip_norm=op.inputs[n],
        dclipped=grads[:n],
        dglobal_norm=grads[n],
    )
    return list(dt) + [dclip_norm]


def _gradient_formula(t_list, clip_norm, dclipped, dglobal_norm):
    """ClipByGlobalNormGrad's outputs in TensorFlow ops, in float64 (see
    core/kernels/clip_by_global_norm/clip_by_global_norm_op.h): differentiable,
    for the second order. The first order comes from the fused op."""
    wide = [tf.cast(t, tf.float64) for t in t_list]
    dwide = [tf.cast(d, tf.float64) for d in dclipped]
    clip = tf.cast(clip_norm, tf.float64)
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(t * t) for t in wide]))
    dot = tf.add_n([tf.reduce_sum(d * t) for d, t in zip(dwide, wide)])
    clipping = 1.0 / norm < 1.0 / clip
    # Divisions by a zero norm are masked out; dividing by 1 there keeps
    # their gradients finite.
    safe_norm = tf.where(norm > 0, norm, tf.ones_like(norm))
    scale = tf.where(clipping, clip / safe_norm, tf.ones_like(norm))
    dscale_dnorm = tf.where(clipping, -clip / (safe_norm * safe_norm), 0.0)
    dscale_dclip = tf.where(clipping, 1.0 / safe_norm, 0.0)
    dnorm = dot * dscale_dnorm + tf.cast(dglobal_norm, tf.float64)
    x_coef = tf.where(norm > 0, dnorm / safe_norm, 0.0)
    dtype = t_list[0].dtype
    dt = [tf.cast(scale * d + t * x_coef, dtype) for d, t in zip(dwide, wide)]
    return dt, tf.cast(dot * dscale_dclip, dtype)


@tf.RegisterGradient("CustomOps>ClipByGlobalNormGrad")
def _clip_by_global_norm_grad_grad(op, *grads):
    """The second order: the gradient of `_gradient_formula`, which computes
    what the op computes."""
    n = op.get_attr("N")
    t_list = list(op.inputs[:n])
    clip_norm = op.inputs[n]
    dclipped = list(op.inputs[n + 1 : 2 * n + 1])
    dglobal_norm = op.inputs[2 * n + 1]
    inputs = [*t_list, clip_norm, *dclipped, dglobal_norm]
    upstream = [
        tf.zeros_like(out) if g is None else g for out, g in zip(op.outputs, grads)
    ]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        dt, dclip_norm = _gradient_formula(t_list, clip_norm, dclipped, dglobal_norm)
    return tape.gradient([*dt, dclip_norm], inputs, output_gradients=upstream)
