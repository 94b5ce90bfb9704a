"""CustomOps>MatrixMul: a matrix product with optional transposes, and its
gradient."""

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.op_specs import allowed_dtypes, typed_tensor

_ops = load_library.load_op_library()
_DTYPES = allowed_dtypes("CustomOps>MatrixMul")


def matrix_mul(a, b, transpose_a=False, transpose_b=False, name=None):
    """Multiplies matrix `a` by matrix `b`, transposing either first.

    Args:
      a: A 2-D `Tensor` of type `float16`, `bfloat16`, `float32` or `float64`,
        of shape `[m, k]` (`[k, m]` if `transpose_a`).
      b: A 2-D `Tensor` of the same type, of shape `[k, n]` (`[n, k]` if
        `transpose_b`).
      transpose_a: If `True`, `a` is transposed before the product.
      transpose_b: If `True`, `b` is transposed before the product.
      name: A name for the operation (optional).

    Returns:
      The `[m, n]` product, of the dtype of `a`.

    Raises:
      TypeError: if `a` is not floating point or `b` is not of its type.
      InvalidArgumentError: if an input is not a matrix or the inner
        dimensions differ.

    Example:

    >>> tfco.matrix_mul([[1.0, 2.0]], [[3.0], [4.0]])
    <tf.Tensor: shape=(1, 1), dtype=float32, numpy=array([[11.]], dtype=float32)>
    >>> tfco.matrix_mul([[1.0, 2.0]], [[1.0, 2.0]], transpose_b=True)
    <tf.Tensor: shape=(1, 1), dtype=float32, numpy=array([[5.]], dtype=float32)>
    """
    # Convert here: the op's dtype default (float32) would otherwise silently
    # narrow float64 NumPy arrays.
    a = typed_tensor(a, "a", _DTYPES)
    b = typed_tensor(b, "b", _DTYPES, like=("a", a.dtype))
    return _ops.custom_ops_matrix_mul(
        a=a, b=b, transpose_a=transpose_a, transpose_b=transpose_b, name=name
    )


@tf.RegisterGradient("CustomOps>MatrixMul")
def _matrix_mul_grad(op, grad):
    """With C = op(A) op(B): dop(A) = dC op(B)^T and dop(B) = op(A)^T dC, then
    the transposes of op undone. The four cases match core/ops/matrix_mul_grad.cc.
    """
    a, b = op.inputs
    ta = op.get_attr("transpose_a")
    tb = op.get_attr("transpose_b")
    if not ta and not tb:
        return matrix_mul(grad, b, transpose_b=True), matrix_mul(
            a, grad, transpose_a=True
        )
    if not ta and tb:
        return matrix_mul(grad, b), matrix_mul(grad, a, transpose_a=True)
    if ta and not tb:
        return matrix_mul(b, grad, transpose_b=True), matrix_mul(a, grad)
    return (
        matrix_mul(b, grad, transpose_a=True, transpose_b=True),
        matrix_mul(grad, a, transpose_a=True, transpose_b=True),
    )
