"""Gradient utilities built on tf.custom_gradient, exposed as `tfco.gradients`.

Each one fixes a gradient that plain autodiff gets wrong or does not give:

- `safe_where`: no NaN gradient from the branch a `tf.where` did not take.
- `straight_through_round`: rounds forward, passes the gradient through.
- `clip_gradient`: identity forward, clips the gradient flowing back.
- `softmax_cross_entropy`: the gradient in its simplified form, probs - labels.

Each checks its arguments and names the one it rejects.
"""

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops.check_condition_ops import check_condition


def _tensor(value, name):
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a tensor: {error}") from None


def _floating(value, name):
    """`value` as a tensor; gradients flow only to floating-point ones."""
    value = _tensor(value, name)
    if not value.dtype.is_floating:
        raise TypeError(f"{name} must be floating-point, got {value.dtype.name}")
    return value


def _same_shape(value, name, like, like_name):
    """Raises unless `value` has the shape of `like`; for dimensions unknown
    until run time, returns the check, for `_checked`."""
    if not value.shape.is_compatible_with(like.shape):
        raise ValueError(
            f"{name} must have the shape of {like_name}, {like.shape}, got "
            f"{value.shape}"
        )
    if value.shape.is_fully_defined() and like.shape.is_fully_defined():
        return []
    shape, like_shape = tf.shape(value), tf.shape(like)
    # Compared at one length, which XLA needs to compile it.
    rank = tf.maximum(tf.size(shape), tf.size(like_shape))
    same = tf.logical_and(
        tf.equal(tf.size(shape), tf.size(like_shape)),
        tf.reduce_all(tf.equal(_padded(shape, rank), _padded(like_shape, rank))),
    )
    return [(same, f"{name} must have the shape of {like_name}")]


def _padded(shape, rank):
    """`shape` (a 1-D tensor) left-padded with ones to length `rank`."""
    return tf.concat([tf.ones([rank - tf.size(shape)], shape.dtype), shape], 0)


def _checked(values, checks):
    """`values` (a list) through the run-time checks, (condition, message)
    pairs: CustomOps>CheckCondition raises the message where its condition
    is false, in graphs and under XLA, which drops an Assert. What reads the
    returned tensors runs after the checks."""
    for condition, message in checks:
        values = check_condition(condition, values, message)
    return list(values)


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
    for name, fn in (("x_fn", x_fn), ("y_fn", y_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be a function of the inputs, got {fn!r}")
    if not inputs:
        raise ValueError(
            "safe_where needs at least one input: the tensors x_fn and y_fn read"
        )
    cond = _tensor(cond, "cond")
    if cond.dtype != tf.bool:
        raise TypeError(f"cond must be bool, got {cond.dtype.name}")
    inputs = [_floating(x, f"inputs[{i}]") for i, x in enumerate(inputs)]
    checks = []
    for i, x in enumerate(inputs):
        checks += _same_shape(x, f"inputs[{i}]", cond, "cond")

    @tf.custom_gradient
    def _select(*xs):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(xs)
            taken = _branch(x_fn, "x_fn", xs)
            other = _branch(y_fn, "y_fn", xs)
        if taken.dtype != other.dtype:
            raise TypeError(
                f"x_fn and y_fn must return one dtype, got {taken.dtype.name} and "
                f"{other.dtype.name}"
            )
        # Checked before the select, which would fail on its own first (or
        # broadcast); the gradients below differentiate the unchecked ones.
        value = tf.where(
            cond,
            *_checked(
                [taken, other],
                _same_shape(taken, "x_fn's result", cond, "cond")
                + _same_shape(other, "y_fn's result", cond, "cond"),
            ),
        )

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

    return _select(*_checked(inputs, checks))


def _branch(fn, name, xs):
    """`fn(*xs)`, a branch of `safe_where`, as a floating-point tensor."""
    result = _tensor(fn(*xs), f"{name}'s result")
    if not result.dtype.is_floating:
        raise TypeError(
            f"{name} must return floating-point values, got {result.dtype.name}"
        )
    return result


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
    return _round_with_identity_gradient(_floating(x, "x"))


@tf.custom_gradient
def _round_with_identity_gradient(x):
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
      lo: The smallest gradient value let through: a real number, or a tensor
        that broadcasts to the shape of `x`; not NaN.
      hi: The largest gradient value let through, likewise; at least `lo`
        (checked at run time when a bound's value is not known before).

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
    x = _floating(x, "x")
    lo, checks = _bound(lo, "lo", x)
    hi, hi_checks = _bound(hi, "hi", x)
    lo_value, hi_value = tf.get_static_value(lo), tf.get_static_value(hi)
    known = lo_value is not None and hi_value is not None
    if known and not np.all(lo_value <= hi_value):
        raise ValueError(
            f"lo must be at most hi, and neither NaN; got lo={lo_value} and "
            f"hi={hi_value}"
        )
    # x passes through the checks too, so that they run with the forward.
    x, lo, hi = _checked([x, lo, hi], checks + hi_checks)
    if not known:
        # Compared once they are known to broadcast.
        x, lo, hi = check_condition(
            tf.reduce_all(lo <= hi),
            [x, lo, hi],
            "lo must be at most hi, and neither NaN",
        )

    @tf.custom_gradient
    def _identity(value):
        def grad(upstream):
            return tf.clip_by_value(upstream, lo, hi)

        return tf.identity(value), grad

    return _identity(x)


def _bound(value, name, x):
    """A bound of `clip_gradient` in the dtype of `x`, and the run-time check
    that it broadcasts to `x`'s shape without growing it, for `_checked`."""
    value = _tensor(value, name)
    if not (value.dtype.is_floating or value.dtype.is_integer):
        raise TypeError(f"{name} must be a real number, got {value.dtype.name}")
    try:
        broadcast = tf.broadcast_static_shape(x.shape, value.shape)
    except ValueError:
        broadcast = None
    if broadcast is None or not broadcast.is_compatible_with(x.shape):
        raise ValueError(
            f"{name} must be a scalar or broadcast to the shape of x, {x.shape}, "
            f"got shape {value.shape}"
        )
    checks = []
    if not (x.shape.is_fully_defined() and value.shape.is_fully_defined()):
        x_shape, shape = tf.shape(x), tf.shape(value)
        # Both shapes left-padded with ones to one rank, where each of the
        # bound's dimensions must be 1 or x's.
        rank = tf.maximum(tf.size(x_shape), tf.size(shape))
        padded = _padded(shape, rank)
        fits = tf.logical_and(
            tf.size(shape) <= tf.size(x_shape),
            tf.reduce_all((padded == 1) | (padded == _padded(x_shape, rank))),
        )
        checks.append((fits, f"{name} must broadcast to the shape of x"))
    return tf.cast(value, x.dtype), checks


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
    logits = _floating(logits, "logits")
    if logits.shape.rank == 0:
        raise ValueError("logits must have a classes axis, got a scalar")
    # Tensors keep their dtype; Python and NumPy numbers take the logits'.
    if isinstance(labels, (tf.Tensor, tf.Variable)) and labels.dtype != logits.dtype:
        raise TypeError(
            f"labels must have the dtype of logits, {logits.dtype.name}, got "
            f"{labels.dtype.name}"
        )
    try:
        labels = tf.convert_to_tensor(labels, dtype=logits.dtype)
    except (TypeError, ValueError) as error:
        raise TypeError(f"labels must be numbers: {error}") from None
    return _softmax_cross_entropy(
        *_checked([logits, labels], _same_shape(labels, "labels", logits, "logits"))
    )


@tf.custom_gradient
def _softmax_cross_entropy(logits, labels):
    log_probs = tf.nn.log_softmax(logits)
    loss = -tf.reduce_sum(labels * log_probs, axis=-1)

    def grad(upstream):
        upstream = upstream[..., tf.newaxis]
        return upstream * (tf.exp(log_probs) - labels), -upstream * log_probs

    return loss, grad
