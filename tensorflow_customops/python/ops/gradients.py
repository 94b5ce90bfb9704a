"""Gradient utilities built on tf.custom_gradient, exposed as `tfco.gradients`.

Each one fixes a gradient that plain autodiff gets wrong or does not give:

- `safe_where`: no NaN gradient from the branch a `tf.where` did not take.
- `straight_through_round`: rounds forward, passes the gradient through.
- `clip_gradient`: identity forward, clips the gradient flowing back.
- `softmax_cross_entropy`: the gradient in its simplified form, probs - labels.
"""

import tensorflow as tf


def safe_where(cond, x_fn, y_fn, *inputs):
    """`tf.where(cond, x_fn(*inputs), y_fn(*inputs))` without NaN gradients.

    With a plain `tf.where`, the branch that is not taken still gets a zero
    upstream gradient, and `0 * inf` or `0 * nan` from its local derivative
    (`sqrt` at 0, `log` at negative values) turns into NaN. Here each branch's
    gradient is kept only where that branch was taken.

    The branch functions must be elementwise: output element `j` depends on
    element `j` of each input only. The inputs they read are passed explicitly
    because a custom gradient can only differentiate its own arguments.

    Args:
      cond: A boolean `Tensor`.
      x_fn: Elementwise function of `inputs`, used where `cond` is true.
      y_fn: Elementwise function of `inputs`, used where `cond` is false.
      *inputs: Floating-point `Tensor`s of the shape of `cond`.

    Returns:
      The selected values, of the shape of `cond`.

    Example:

    >>> x = tf.constant([-1.0, 4.0])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = tfco.gradients.safe_where(x > 0, tf.sqrt, tf.zeros_like, x)
    >>> tape.gradient(y, x)
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([0.  , 0.25], dtype=float32)>
    """
    cond = tf.convert_to_tensor(cond, dtype=tf.bool)

    @tf.custom_gradient
    def _select(*xs):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(xs)
            taken = x_fn(*xs)
            other = y_fn(*xs)
        value = tf.where(cond, taken, other)

        def grad(upstream):
            from_taken = tape.gradient(taken, xs, output_gradients=upstream)
            from_other = tape.gradient(other, xs, output_gradients=upstream)
            # A branch that ignores an input gives None for it.
            return [
                tf.where(
                    cond,
                    tf.zeros_like(x) if gx is None else gx,
                    tf.zeros_like(x) if gy is None else gy,
                )
                for x, gx, gy in zip(xs, from_taken, from_other)
            ]

        return value, grad

    return _select(*[tf.convert_to_tensor(x) for x in inputs])


@tf.custom_gradient
def straight_through_round(x):
    """Rounds `x` to the nearest integer, with the identity as its gradient.

    `tf.round` has no gradient at all (its true derivative is zero almost
    everywhere), which stops training of anything before a quantisation step;
    the straight-through estimator treats the rounding as the identity when
    going backwards.

    Args:
      x: A floating-point `Tensor`.

    Returns:
      `tf.round(x)` (half to even).

    Example:

    >>> x = tf.constant([0.4, 1.6])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = tfco.gradients.straight_through_round(x)
    >>> y
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([0., 2.], dtype=float32)>
    >>> tape.gradient(y, x)
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 1.], dtype=float32)>
    """

    def grad(upstream):
        return upstream

    return tf.round(x), grad


def clip_gradient(x, lo, hi):
    """Returns `x` unchanged, and clips the gradient flowing back to `[lo, hi]`.

    Bounds each element of the gradient that reaches `x`, so a spike in one
    step (an exploding RNN, a loss near a singularity) cannot push the
    parameters before `x` arbitrarily far.

    Args:
      x: A floating-point `Tensor`.
      lo: The smallest gradient value let through (scalar or broadcastable).
      hi: The largest gradient value let through.

    Returns:
      `x`.

    Example:

    >>> x = tf.constant([1.0, 2.0])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = tfco.gradients.clip_gradient(x, -1.0, 1.0) * 100.0
    >>> tape.gradient(y, x)
    <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 1.], dtype=float32)>
    """

    @tf.custom_gradient
    def _identity(value):
        def grad(upstream):
            return tf.clip_by_value(
                upstream,
                tf.cast(lo, upstream.dtype),
                tf.cast(hi, upstream.dtype),
            )

        return tf.identity(value), grad

    return _identity(tf.convert_to_tensor(x))


@tf.custom_gradient
def softmax_cross_entropy(logits, labels):
    """Cross-entropy of `labels` against `softmax(logits)` on the last axis.

    Computed from `tf.nn.log_softmax`, so extreme logits give finite values,
    where the composed `-sum(labels * log(softmax(logits)))` gives inf and NaN
    gradients. The gradient with respect to `logits` is the simplified form
    `softmax(logits) - labels`, which is exact when each row of `labels` sums
    to one (a probability distribution, as for one-hot labels).

    Args:
      logits: A floating-point `Tensor` of shape `[..., classes]`.
      labels: A `Tensor` of the same shape and dtype: a probability
        distribution over the classes in each row.

    Returns:
      The losses, of shape `logits.shape[:-1]`.

    Example:

    >>> tfco.gradients.softmax_cross_entropy([[0.0, 0.0]], [[1.0, 0.0]])
    <tf.Tensor: shape=(1,), dtype=float32, numpy=array([0.6931472], dtype=float32)>
    """
    logits = tf.convert_to_tensor(logits)
    labels = tf.convert_to_tensor(labels, dtype=logits.dtype)
    log_probs = tf.nn.log_softmax(logits)
    loss = -tf.reduce_sum(labels * log_probs, axis=-1)

    def grad(upstream):
        upstream = upstream[..., tf.newaxis]
        return upstream * (tf.exp(log_probs) - labels), -upstream * log_probs

    return loss, grad
