"""Parity of tfco.deform_conv2d with torchvision.ops.deform_conv2d: the
output and the gradients of input, offset, mask, filter and bias, in NHWC
and NCHW, float64 within 1e-9 and float32 within 2e-4 (relative to the
largest magnitude), with groups and offset groups above 1, non-square
kernels, strides, dilations and padding, with and without a mask; and the
offset gradient of samples exactly on the padding edge (vision#6885).

torchvision is optional: these tests are skipped when it is not importable,
and it is never a dependency of the library.
"""

# torch must be loaded before TensorFlow: the other order crashes at import
# (both bundle native libraries).
try:
    import torch
    import torchvision.ops as tv_ops

    _SKIP_REASON = None
except ImportError as e:  # optional dependency
    _SKIP_REASON = f"torchvision is not installed ({e}); parity tests skipped"

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.deform_conv2d import (
    deform_conv2d_reference as ref,
)

_TOLERANCE = {tf.float64: 1e-9, tf.float32: 2e-4}
_CONFIGS = [
    dict(kernel=(3, 3), groups=1, offset_groups=1, strides=(1, 1),
         padding=(1, 1, 1, 1), dilations=(1, 1)),
    dict(kernel=(3, 2), groups=2, offset_groups=2, strides=(2, 1),
         padding=(1, 1, 2, 2), dilations=(1, 2)),
    dict(kernel=(1, 3), groups=1, offset_groups=4, strides=(1, 2),
         padding=(0, 0, 1, 1), dilations=(2, 1)),
    dict(kernel=(2, 2), groups=4, offset_groups=1, strides=(2, 2),
         padding=(2, 2, 0, 0), dilations=(1, 1)),
]  # fmt: skip


def _cases():
    return [
        dict(
            testcase_name=f"{i}_{fmt}_{'mask' if mask else 'nomask'}_{dtype.name}",
            config=config,
            data_format=fmt,
            mask=mask,
            dtype=dtype,
        )
        for i, config in enumerate(_CONFIGS)
        for fmt in ("NHWC", "NCHW")
        for mask in (True, False)
        for dtype in (tf.float64, tf.float32)
    ]


def _torchvision(case, bias, upstream, dtype):
    """torchvision's output and gradients (input, offset, filter, mask,
    bias), in the case's NHWC/HWIO layouts."""
    np_dtype = dtype.as_numpy_dtype

    def tensor(a, perm):
        return torch.tensor(np.transpose(a, perm).astype(np_dtype), requires_grad=True)

    x = tensor(case.input, [0, 3, 1, 2])
    offset = tensor(case.offset, [0, 3, 1, 2])
    weight = tensor(case.filter, [3, 2, 0, 1])
    mask = None if case.mask is None else tensor(case.mask, [0, 3, 1, 2])
    b = torch.tensor(bias.astype(np_dtype), requires_grad=True)
    top, bottom, left, right = case.padding
    y = tv_ops.deform_conv2d(
        x, offset, weight, b, stride=case.strides, padding=(top, left),
        dilation=case.dilations, mask=mask,
    )  # fmt: skip
    y.backward(torch.tensor(np.transpose(upstream, [0, 3, 1, 2]).astype(np_dtype)))
    grads = [
        np.transpose(x.grad.numpy(), [0, 2, 3, 1]),
        np.transpose(offset.grad.numpy(), [0, 2, 3, 1]),
        np.transpose(weight.grad.numpy(), [2, 3, 1, 0]),
    ]
    if mask is not None:
        grads.append(np.transpose(mask.grad.numpy(), [0, 2, 3, 1]))
    grads.append(b.grad.numpy())
    return np.transpose(y.detach().numpy(), [0, 2, 3, 1]), grads


def _ours(case, bias, upstream, dtype, data_format):
    inputs = [
        tf.constant(a, dtype)
        for a in (case.input, case.offset, case.filter, case.mask, bias)
        if a is not None
    ]
    nchw = data_format == "NCHW"

    def layout(a):
        return tf.transpose(a, [0, 3, 1, 2]) if nchw else a

    with tf.GradientTape() as tape:
        tape.watch(inputs)
        x, offset, filt = inputs[:3]
        mask = None if case.mask is None else layout(inputs[3])
        y = tfco.deform_conv2d(
            layout(x),
            layout(offset),
            filt,
            bias=inputs[-1],
            mask=mask,
            data_format=data_format,
            **case.kwargs(),
        )
        if nchw:
            y = tf.transpose(y, [0, 2, 3, 1])
    grads = tape.gradient(y, inputs, output_gradients=tf.constant(upstream, dtype))
    return y.numpy(), [g.numpy() for g in grads]


class DeformConv2dTorchvisionParityTest(tf.test.TestCase, parameterized.TestCase):
    def setUp(self):
        super().setUp()
        if _SKIP_REASON:
            self.skipTest(_SKIP_REASON)

    def assertClose(self, got, want, dtype, what):
        scale = max(np.abs(want).max(), 1.0)
        np.testing.assert_allclose(
            got, want, rtol=0, atol=_TOLERANCE[dtype] * scale, err_msg=what
        )

    @parameterized.named_parameters(_cases())
    def test_forward_and_gradients(self, config, data_format, mask, dtype):
        case = ref.make_case(
            20, n=2, c=4, h=6, w=7, o=4, mask=mask, offset_scale=1.5, **config
        )
        rng = np.random.default_rng(21)
        bias = rng.normal(size=4)
        upstream = rng.normal(size=ref.forward(case).shape)
        y_tv, grads_tv = _torchvision(case, bias, upstream, dtype)
        y, grads = _ours(case, bias, upstream, dtype, data_format)
        self.assertClose(y, y_tv, dtype, "output")
        names = ["input", "offset", "filter"] + (["mask"] if mask else []) + ["bias"]
        for name, got, want in zip(names, grads, grads_tv):
            self.assertClose(got, want, dtype, f"gradient of {name}")

    @parameterized.parameters("NHWC", "NCHW")
    def test_offset_gradient_on_the_padding_edge(self, data_format):
        """Zero offsets and padding 1 put the first row's taps on y = -1."""
        case = ref.make_case(
            22, n=1, c=3, h=5, w=5, o=2, kernel=(3, 3), groups=1, offset_groups=1,
            strides=(1, 1), padding=(1, 1, 1, 1), dilations=(1, 1),
        )  # fmt: skip
        case.offset = np.zeros_like(case.offset)
        upstream = np.random.default_rng(23).normal(size=(1, 5, 5, 2))
        bias = np.zeros(2)
        _, grads_tv = _torchvision(case, bias, upstream, tf.float64)
        _, grads = _ours(case, bias, upstream, tf.float64, data_format)
        self.assertClose(grads[1], grads_tv[1], tf.float64, "offset gradient")
        # The first row's dy gradients are torchvision's nonzero ones.
        self.assertGreater(np.abs(grads_tv[1][0, 0, :, 0:6:2]).max(), 0.1)


if __name__ == "__main__":
    tf.test.main()
