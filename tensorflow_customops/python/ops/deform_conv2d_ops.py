"""CustomOps>DeformableConv2d: modulated deformable convolution (DCNv2), as
torchvision.ops.deform_conv2d, with its gradient."""

import numbers

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.op_specs import allowed_dtypes, typed_tensor
from tensorflow_customops.python.ops.roi_checks import check_data_format, check_size
from tensorflow_customops.python.ops.roi_grad import known_zero, zeros_unless

_ops = load_library.load_op_library()

_DTYPES = allowed_dtypes("CustomOps>DeformableConv2d")
_ATTRS = (
    "strides",
    "padding",
    "explicit_paddings",
    "dilations",
    "offset_groups",
    "data_format",
    "use_mask",
)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_padding(padding):
    """(op padding, explicit (top, bottom, left, right) or None) from "SAME",
    "VALID", an int, a (height, width) pair or ((top, bottom), (left,
    right))."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(
                f"padding must be 'SAME', 'VALID' or numbers, got {padding!r}"
            )
        return padding.upper(), None
    if _is_int(padding):
        pads = (padding,) * 4
    elif isinstance(padding, (list, tuple)) and len(padding) == 2:
        if all(_is_int(p) for p in padding):
            pads = (padding[0], padding[0], padding[1], padding[1])
        elif all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(map(_is_int, p))
            for p in padding
        ):
            pads = (*padding[0], *padding[1])
        else:
            pads = None
    else:
        pads = None
    if pads is None:
        raise TypeError(
            "padding must be 'SAME', 'VALID', an int, a (height, width) pair or "
            f"((top, bottom), (left, right)), got {padding!r}"
        )
    if min(pads) < 0 or max(pads) >= 2**31:
        raise ValueError(f"padding must be in [0, 2**31), got {padding!r}")
    return "EXPLICIT", tuple(int(p) for p in pads)


def _tensor(value, name, dtype=None):
    tensor = typed_tensor(value, name, _DTYPES, dtype and ("input", dtype))
    if tensor.shape.rank is not None and tensor.shape.rank != 4:
        raise ValueError(f"{name} must have rank 4, got shape {tensor.shape}")
    return tensor


def _offset_groups(offset, filter, data_format):
    """offset_groups from offset's channels, 2 * offset_groups * kh * kw; 0
    (the op reads it at run time) where they are not known statically."""
    channels = offset.shape[1 if data_format == "NCHW" else 3]
    kh, kw = filter.shape[0], filter.shape[1]
    if 0 in filter.shape[:3]:
        raise ValueError(
            "filter must have positive height, width and input channels, got "
            f"shape {filter.shape}"
        )
    if channels is None or kh is None or kw is None:
        return 0
    if kh * kw == 0 or channels == 0 or channels % (2 * kh * kw):
        raise ValueError(
            f"offset must have 2 * offset_groups * kh * kw channels (kh, kw = {kh}, "
            f"{kw}) with offset_groups >= 1, got {channels}"
        )
    return channels // (2 * kh * kw)


def _spatial(pair, data_format):
    """A (height, width) pair as a 4-entry list in data_format order."""
    return [1, 1, *pair] if data_format == "NCHW" else [1, *pair, 1]


def deform_conv2d(
    input,
    offset,
    filter,
    bias=None,
    strides=1,
    padding=0,
    dilations=1,
    mask=None,
    data_format="NHWC",
    name=None,
):
    """Modulated deformable 2-D convolution (DCNv2), as
    `torchvision.ops.deform_conv2d`.

    Tap (i, j) of output pixel (y, x) reads the input bilinearly at row
    `y * stride_h - pad_top + i * dilation_h + dy` and column
    `x * stride_w - pad_left + j * dilation_w + dx` (0 outside the map), times
    its mask, where (dy, dx) are offset channels 2k and 2k + 1 for
    k = (g * kh + i) * kw + j of the channel's offset group g. Half and
    bfloat16 compute in float32 and round once.

    Args:
      input: [N, H, W, C] (NCHW: [N, C, H, W]) of float16, bfloat16, float32 or
        float64.
      offset: [N, Ho, Wo, 2 * offset_groups * kh * kw] (NCHW: channels
        second, torchvision's layout), input's dtype; its channels set
        offset_groups, which must divide C (read at run time where the
        channels are not known statically).
      filter: [kh, kw, C / groups, O] as for `tf.nn.conv2d`; groups = C / its
        third dimension.
      bias: None or [O], added to the output.
      strides: an int or a (height, width) pair.
      padding: "SAME" or "VALID" (as `tf.nn.conv2d`), an int or a (height,
        width) pair (on both sides, as torchvision), or ((top, bottom), (left,
        right)).
      dilations: an int or a (height, width) pair.
      mask: None (DCNv1) or [N, Ho, Wo, offset_groups * kh * kw] (NCHW:
        channels second), used as given (no sigmoid).
      data_format: "NHWC" or "NCHW" ("channels_last", "channels_first").
      name: A name for the operation (optional).

    Returns:
      [N, Ho, Wo, O] (NCHW: [N, O, Ho, Wo]) of input's dtype.

    Raises:
      TypeError, ValueError: an argument is malformed; the message names it.

    Example (zero offsets and a unit mask give `tf.nn.conv2d`):

    >>> x = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
    >>> w = tf.ones([2, 2, 1, 1])
    >>> y = tfco.deform_conv2d(x, tf.zeros([1, 3, 3, 8]), w)
    >>> y[0, :, :, 0].numpy()
    array([[10., 14., 18.],
           [26., 30., 34.],
           [42., 46., 50.]], dtype=float32)
    """
    data_format = check_data_format(data_format)
    strides = check_size(strides, "strides")
    dilations = check_size(dilations, "dilations")
    padding, pads = _check_padding(padding)
    with tf.name_scope(name or "deform_conv2d"):
        input = _tensor(input, "input")
        dtype = input.dtype
        offset = _tensor(offset, "offset", dtype)
        filter = _tensor(filter, "filter", dtype)
        offset_groups = _offset_groups(offset, filter, data_format)
        use_mask = mask is not None
        # Without a mask the op takes an empty one (the op's use_mask).
        mask = _tensor(mask, "mask", dtype) if use_mask else tf.zeros([0], dtype)
        explicit = []
        if pads is not None:
            top, bottom, left, right = pads
            explicit = (
                [0, 0, 0, 0, top, bottom, left, right]
                if data_format == "NCHW"
                else [0, 0, top, bottom, left, right, 0, 0]
            )
        output = _ops.custom_ops_deformable_conv2d(
            input=input,
            filter=filter,
            offset=offset,
            mask=mask,
            strides=_spatial(strides, data_format),
            padding=padding,
            explicit_paddings=explicit,
            dilations=_spatial(dilations, data_format),
            offset_groups=offset_groups,
            data_format=data_format,
            use_mask=use_mask,
        )
        if bias is not None:
            bias = _bias(bias, dtype)
            output = tf.nn.bias_add(output, bias, data_format=data_format)
        return output


def _bias(bias, dtype):
    bias = tf.convert_to_tensor(bias, dtype_hint=dtype)
    if bias.dtype != dtype:
        raise TypeError(
            f"bias must have input's dtype, {dtype.name}, got {bias.dtype.name}"
        )
    if bias.shape.rank is not None and bias.shape.rank != 1:
        raise ValueError(f"bias must have rank 1, got shape {bias.shape}")
    return bias


@tf.RegisterGradient("CustomOps>DeformableConv2d")
def _deformable_conv2d_grad(op, grad):
    """All four gradients come from the gradient op; the mask's is empty
    without use_mask."""
    attrs = {name: op.get_attr(name) for name in _ATTRS}
    return list(_ops.custom_ops_deformable_conv2d_grad(*op.inputs, grad, **attrs))


SECOND_ORDER_ERROR = (
    "CustomOps>DeformableConv2dGrad has no gradient: second derivatives of "
    "deform_conv2d are not implemented"
)


@tf.RegisterGradient("CustomOps>DeformableConv2dGrad")
def _deformable_conv2d_grad_grad(op, *grads):
    """Second derivatives are not implemented. A traced gradient of a
    function differentiates every output, so this cannot raise while
    tracing: nothing flowing in gives no gradient, zeros at run time give
    zeros, and anything else fails at run time rather than being taken for
    zero."""
    if all(known_zero(g) for g in grads):
        return [None] * len(op.inputs)
    nonzero = [tf.reduce_any(tf.not_equal(g, 0)) for g in grads if g is not None]
    return zeros_unless(op, tf.reduce_any(tf.stack(nonzero)), SECOND_ORDER_ERROR)
