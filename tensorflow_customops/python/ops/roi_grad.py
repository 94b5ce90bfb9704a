"""The Python gradients of the RoI ops: first order (d(features) from the
gradient ops, d(rois) from the box gradient ops), of the gradient ops
(second order), and the run-time error of the box gradient ops' own
(known_zero and zeros_unless serve DeformableConv2d's second order too)."""

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.ops.check_condition_ops import check_condition

_ops = load_library.load_op_library()

_POOL_ATTRS = ("pooled_height", "pooled_width", "spatial_scale", "data_format")
_ALIGN_ATTRS = (*_POOL_ATTRS, "sampling_ratio", "aligned")
_PS_ALIGN_ATTRS = _ALIGN_ATTRS


def _skipped(op, index):
    """Whether autodiff needs no gradient for input `index` of `op` (eager
    only: TensorFlow names the inputs nothing is watching)."""
    return index in (getattr(op, "skip_input_indices", None) or ())


def _box_gradient(op, box_grad_op, grads, features, rois, attrs):
    """d(rois) of `op`, whose rois are input 1: None when autodiff needs none,
    zeros for the pooling kinds (no `box_grad_op`), else the box gradient op
    fed `grads` and `features`."""
    if _skipped(op, 1):
        return None
    if box_grad_op is None:
        return tf.zeros_like(rois)
    return box_grad_op(grads=grads, features=features, rois=rois, **attrs)


def _register_gradient(op_type, grad_op, attr_names, box_grad_op=None):
    """Registers the Python gradient of a RoI op: d(features) from its gradient
    op, and d(rois) from its box gradient op. The pooling kinds round boxes to
    whole pixels, so their output is piecewise constant in the coordinates and
    their box gradient is zero (where it exists)."""

    @tf.RegisterGradient(op_type)
    def _grad(op, grad, *_):
        attrs = {name: op.get_attr(name) for name in attr_names}
        features, rois = op.inputs[0], op.inputs[1]
        grad_features = None
        if not _skipped(op, 0):
            argmax = {"argmax": op.outputs[1]} if len(op.outputs) > 1 else {}
            grad_features = grad_op(
                grads=grad,
                rois=rois,
                features_shape=tf.shape(features, out_type=tf.int32),
                **argmax,
                **attrs,
            )
        grad_rois = _box_gradient(op, box_grad_op, grad, features, rois, attrs)
        return [grad_features, grad_rois]


_register_gradient("CustomOps>RoiPool", _ops.custom_ops_roi_pool_grad, _POOL_ATTRS)
_register_gradient(
    "CustomOps>RoiAlign",
    _ops.custom_ops_roi_align_grad,
    _ALIGN_ATTRS,
    _ops.custom_ops_roi_align_grad_boxes,
)
_register_gradient("CustomOps>PsRoiPool", _ops.custom_ops_ps_roi_pool_grad, _POOL_ATTRS)
_register_gradient(
    "CustomOps>PsRoiAlign",
    _ops.custom_ops_ps_roi_align_grad,
    _PS_ALIGN_ATTRS,
    _ops.custom_ops_ps_roi_align_grad_boxes,
)


def _gather_at_argmax(features, rois, argmax, data_format):
    """`features` at RoiPool's argmax positions (0 for empty bins): the adjoint
    of RoiPoolGrad in its incoming gradient."""
    shape = tf.shape(features, out_type=tf.int64)
    image = tf.cast(rois[:, 0], tf.int64)[:, None, None, None]
    position = tf.cast(argmax, tf.int64)
    if data_format == b"NHWC" or data_format == "NHWC":
        _, height, width, channels = tf.unstack(shape)
        channel = tf.range(channels)
        index = (image * height * width + position) * channels + channel
    else:
        _, channels, height, width = tf.unstack(shape)
        channel = tf.range(channels)[:, None, None]
        index = (image * channels + channel) * height * width + position
    # Empty bins read an appended zero, so an empty map needs no special case.
    values = tf.concat([tf.reshape(features, [-1]), tf.zeros([1], features.dtype)], 0)
    index = tf.where(argmax >= 0, index, tf.size(features, out_type=tf.int64))
    return tf.gather(values, index)


def _register_second_order(grad_op_type, forward_op, attr_names, box_grad_op=None):
    """Registers the gradient of a RoI gradient op. It is linear in its
    incoming gradient, so its own gradient is the forward op (for RoiPoolGrad,
    the gather at argmax). With respect to rois, <h, Grad(g, rois)> is
    <Forward(h, rois), g>, whose box gradient is the box gradient op fed g and
    h; the pooling kinds' is zero. argmax and features_shape get none."""

    @tf.RegisterGradient(grad_op_type)
    def _grad(op, grad):
        attrs = {name: op.get_attr(name) for name in attr_names}
        grads, rois = op.inputs[0], op.inputs[1]
        grad_rois = _box_gradient(op, box_grad_op, grads, grad, rois, attrs)
        if forward_op is None:
            pooled = _gather_at_argmax(grad, rois, op.inputs[2], attrs["data_format"])
            return [pooled, grad_rois, None, None]
        return [forward_op(features=grad, rois=rois, **attrs), grad_rois, None]


_register_second_order("CustomOps>RoiPoolGrad", None, _POOL_ATTRS)
_register_second_order(
    "CustomOps>RoiAlignGrad",
    _ops.custom_ops_roi_align,
    _ALIGN_ATTRS,
    _ops.custom_ops_roi_align_grad_boxes,
)
_register_second_order(
    "CustomOps>PsRoiPoolGrad", _ops.custom_ops_ps_roi_pool, _POOL_ATTRS
)
_register_second_order(
    "CustomOps>PsRoiAlignGrad",
    _ops.custom_ops_ps_roi_align,
    _PS_ALIGN_ATTRS,
    _ops.custom_ops_ps_roi_align_grad_boxes,
)


def known_zero(tensor):
    """Whether `tensor` is zero by construction: the upstream gradient autodiff
    feeds an output nothing depends on (in a function's gradient, say)."""
    if not isinstance(tensor, tf.Tensor):
        return tensor is None
    if not tf.executing_eagerly() and tensor.op.type == "ZerosLike":
        return True
    value = tf.get_static_value(tensor)
    return value is not None and not np.any(value)


def zeros_unless(op, nonzero, message):
    """Zero gradients for `op`'s inputs, or, if the scalar `nonzero` is true,
    an InvalidArgumentError with `message`: raised as is in eager mode, at
    run time by CustomOps>CheckCondition in a graph and under XLA (where the
    program can raise: docs/xla.md)."""
    if tf.executing_eagerly():
        if nonzero:
            raise tf.errors.InvalidArgumentError(None, None, message)
        return [tf.zeros_like(x) for x in op.inputs]
    return check_condition(
        tf.logical_not(nonzero), [tf.zeros_like(x) for x in op.inputs], message
    )


def _register_box_gradient_error(op_type):
    """The box gradient ops' own gradient (a second derivative through box
    coordinates) is not implemented. A function's gradient differentiates
    every output, so a traced gradient of one cannot raise: it checks at run
    time that nothing flows in (and then is zero), and raises otherwise,
    rather than let autodiff treat it as zero."""
    message = (
        f"{op_type} has no gradient: second derivatives through RoI box "
        "coordinates are not implemented (stop the gradient at the boxes, e.g. "
        "tf.stop_gradient(boxes), for higher-order gradients with respect to "
        "the features)"
    )

    @tf.RegisterGradient(op_type)
    def _grad(op, grad):
        if known_zero(grad):
            return [None] * len(op.inputs)
        return zeros_unless(op, tf.reduce_any(tf.not_equal(grad, 0)), message)


_register_box_gradient_error("CustomOps>RoiAlignGradBoxes")
_register_box_gradient_error("CustomOps>PsRoiAlignGradBoxes")
