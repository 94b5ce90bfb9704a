"""Keras layer over tfco.deform_conv2d: DeformConv2D, a modulated deformable
convolution (DCNv2) that predicts its own offsets and mask.

As in DCNv2, a regular convolution of the layer's input, with the layer's
kernel size, strides, padding and dilation and zero-initialised weights,
gives 2 * offset_groups * kh * kw offsets and (with use_mask)
offset_groups * kh * kw mask logits, which a sigmoid turns into the mask. At
initialisation the offsets are 0 and the mask 0.5: the layer starts as half
a regular convolution and learns where to sample.

Like the RoI layers it subclasses the installed `keras` (Keras 3, or Keras 2
on TensorFlow 2.12 to 2.15), needs Keras' TensorFlow backend, and is
registered as `tfco>DeformConv2D`.
"""

import numbers

import keras
import numpy as np
import tensorflow as tf

from tensorflow_customops.python.ops import (
    deform_conv2d_ops,
    load_library,
    roi_checks,
)


def _padding(padding):
    """The layer's padding as tfco.deform_conv2d takes it: "VALID", "SAME",
    or a (height, width) pair of zeros on both sides."""
    if isinstance(padding, str) and padding.lower() in ("valid", "same"):
        return padding.upper()
    pair = (padding, padding) if isinstance(padding, int) else padding
    if (
        not isinstance(pair, (list, tuple))
        or len(pair) != 2
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in pair)
        or min(pair) < 0
    ):
        raise ValueError(
            "padding must be 'valid', 'same', or a non-negative int or (height, "
            f"width) pair, got {padding!r}"
        )
    return tuple(pair)


@keras.utils.register_keras_serializable(package="tfco")
class DeformConv2D(keras.layers.Layer):
    """Modulated deformable 2-D convolution (DCNv2) with learned offsets and
    mask.

    Args:
      filters: the number of output channels.
      kernel_size: an int or a (height, width) pair.
      strides: an int or a (height, width) pair.
      padding: "valid", "same" (as keras.layers.Conv2D), or an int or a
        (height, width) pair of zeros on both sides.
      dilation_rate: an int or a (height, width) pair.
      groups: the input and output channels are split into this many groups.
      offset_groups: channels in offset group g sample at that group's
        offsets; divides the input channels.
      use_mask: whether samples are modulated by a learned mask (DCNv2);
        False gives DCNv1.
      use_bias: whether a bias is added.
      data_format: "channels_last" or "channels_first"; by default
        keras.config.image_data_format().
      kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer: as for keras.layers.Conv2D, for the deformable
        kernel and bias (the offset convolution starts at zero).
    """

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        dilation_rate=1,
        groups=1,
        offset_groups=1,
        use_mask=True,
        use_bias=True,
        data_format=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        backend = keras.backend.backend()
        if backend != "tensorflow":
            raise RuntimeError(
                f"DeformConv2D runs TensorFlow ops, but Keras runs on the "
                f"{backend!r} backend: set KERAS_BACKEND=tensorflow before "
                "importing keras"
            )
        super().__init__(**kwargs)
        # Without the XLA lowerings, this keeps compile(jit_compile="auto")
        # off XLA instead of failing to compile.
        self.supports_jit = load_library.xla_status()[0]
        for name, value in (
            ("filters", filters),
            ("groups", groups),
            ("offset_groups", offset_groups),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Integral)
                or value < 1
            ):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        filters, groups, offset_groups = int(filters), int(groups), int(offset_groups)
        for name, value in (("use_mask", use_mask), ("use_bias", use_bias)):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{name} must be a bool, got {value!r}")
        if filters % groups:
            raise ValueError(
                f"filters ({filters}) must be a multiple of groups ({groups})"
            )
        self.filters = filters
        self.kernel_size = roi_checks.check_size(kernel_size, "kernel_size")
        self.strides = roi_checks.check_size(strides, "strides")
        self.padding = _padding(padding)
        self.dilation_rate = roi_checks.check_size(dilation_rate, "dilation_rate")
        self.groups = groups
        self.offset_groups = offset_groups
        self.use_mask = bool(use_mask)
        self.use_bias = bool(use_bias)
        self.data_format = roi_checks.check_data_format(
            keras.backend.image_data_format() if data_format is None else data_format
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        # Keras checks the rank (and, once built, the channels) when the layer
        # is called, symbolically or not, before the offset convolution sees
        # the input.
        self.input_spec = keras.layers.InputSpec(ndim=4)

    def _channel_axis(self):
        return 1 if self.data_format == "NCHW" else -1

    def _channels(self, input_shape):
        channels = input_shape[self._channel_axis()]
        if channels is None:
            raise ValueError("DeformConv2D needs the input's channels known")
        return channels

    def build(self, input_shape):
        channels = self._channels(input_shape)
        for name, value in (
            ("groups", self.groups),
            ("offset_groups", self.offset_groups),
        ):
            if channels % value:
                raise ValueError(
                    f"input channels ({channels}) must be a multiple of {name} "
                    f"({value})"
                )
        kh, kw = self.kernel_size
        self.kernel = self.add_weight(
            name="kernel",
            shape=(kh, kw, channels // self.groups, self.filters),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
        )
        self.bias = (
            self.add_weight(
                name="bias",
                shape=(self.filters,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
            )
            if self.use_bias
            else None
        )
        taps = self.offset_groups * kh * kw
        predicted = (3 if self.use_mask else 2) * taps
        self.offset_kernel = self.add_weight(
            name="offset_kernel",
            shape=(kh, kw, channels, predicted),
            initializer="zeros",
        )
        self.offset_bias = self.add_weight(
            name="offset_bias", shape=(predicted,), initializer="zeros"
        )
        self.input_spec = keras.layers.InputSpec(
            ndim=4, axes={self._channel_axis(): channels}
        )
        self.built = True

    def _offset_conv(self, x):
        """The offsets and mask logits, channels last, from a regular
        convolution of x (NHWC on CPU, which has no NCHW Conv2D)."""
        if self.data_format == "NCHW":
            x = tf.transpose(x, [0, 2, 3, 1])
        if isinstance(self.padding, str):
            padding = self.padding
        else:
            top, left = self.padding
            padding = [[0, 0], [top, top], [left, left], [0, 0]]
        out = tf.nn.conv2d(
            x,
            tf.cast(self.offset_kernel, x.dtype),
            strides=self.strides,
            padding=padding,
            dilations=self.dilation_rate,
        )
        return out + tf.cast(self.offset_bias, x.dtype)

    def call(self, inputs):
        x = tf.convert_to_tensor(inputs)
        if not x.dtype.is_floating:
            raise TypeError(
                f"DeformConv2D takes floating-point inputs, got {x.dtype.name}"
            )
        self._output_sizes(x.shape)
        predicted = self._offset_conv(x)
        taps = self.offset_groups * self.kernel_size[0] * self.kernel_size[1]
        offset = predicted[..., : 2 * taps]
        mask = tf.sigmoid(predicted[..., 2 * taps :]) if self.use_mask else None
        if self.data_format == "NCHW":
            offset = tf.transpose(offset, [0, 3, 1, 2])
            mask = None if mask is None else tf.transpose(mask, [0, 3, 1, 2])
        return deform_conv2d_ops.deform_conv2d(
            x,
            offset,
            tf.cast(self.kernel, x.dtype),
            bias=None if self.bias is None else tf.cast(self.bias, x.dtype),
            strides=self.strides,
            padding=self.padding,
            dilations=self.dilation_rate,
            mask=mask,
            data_format=self.data_format,
        )

    def _output_sizes(self, input_shape):
        """The output's height and width (None where the input's is unknown);
        a ValueError where the kernel does not fit the padded input."""
        nchw = self.data_format == "NCHW"
        sizes = tuple(input_shape[2:] if nchw else input_shape[1:3])
        out = []
        for axis, size in enumerate(sizes):
            k, s, d = (
                self.kernel_size[axis],
                self.strides[axis],
                self.dilation_rate[axis],
            )
            if size is None:
                out.append(None)
            elif self.padding == "SAME":
                out.append(-(-size // s))
            else:
                pad = 0 if self.padding == "VALID" else 2 * self.padding[axis]
                out.append((size + pad - d * (k - 1) - 1) // s + 1)
        if any(o is not None and o <= 0 for o in out):
            raise ValueError(
                f"DeformConv2D: a kernel of {self.kernel_size} with dilation "
                f"{self.dilation_rate} does not fit an input of height and width "
                f"{sizes} with padding {self.padding!r}: the output would be "
                f"{tuple(out)}"
            )
        return out

    def compute_output_shape(self, input_shape):
        input_shape = tuple(input_shape)
        out = self._output_sizes(input_shape)
        if self.data_format == "NCHW":
            return (input_shape[0], self.filters, *out)
        return (input_shape[0], *out, self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            filters=self.filters,
            kernel_size=self.kernel_size,
            strides=self.strides,
            padding=(
                self.padding.lower() if isinstance(self.padding, str) else self.padding
            ),
            dilation_rate=self.dilation_rate,
            groups=self.groups,
            offset_groups=self.offset_groups,
            use_mask=self.use_mask,
            use_bias=self.use_bias,
            data_format=(
                "channels_first" if self.data_format == "NCHW" else "channels_last"
            ),
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_regularizer=keras.regularizers.serialize(self.kernel_regularizer),
            bias_regularizer=keras.regularizers.serialize(self.bias_regularizer),
        )
        return config
