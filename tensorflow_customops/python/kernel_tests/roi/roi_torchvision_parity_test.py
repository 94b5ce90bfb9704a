"""Parity with torchvision.ops, forward and backward, in NHWC and NCHW.

torchvision is optional: these tests are skipped when it is not importable,
and it is never a dependency of the library. Two deliberate differences are
asserted rather than hidden:
  * ps_roi_align: for a box whose adaptive sampling grid is empty (x2 < x1),
    torchvision divides 0 by 0 and returns NaN; this library returns 0.
  * ps_roi_pool backward: torchvision clips bins to [0, size] in the backward
    pass but to [0, size - 1] in the forward pass, so its gradient is not the
    gradient of its output for bins reaching the last row or column. This
    library's gradient is the exact gradient of its (torchvision-equal)
    output, so backward parity is checked on boxes inside the map.
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

from tensorflow_customops.python.kernel_tests.roi import roi_test_util as util

_TV_DTYPES = {tf.float32: "float32", tf.float64: "float64"}


def _torchvision(op, case, dtype, upstream_nchw=None):
    """torchvision's output (and input gradient), NHWC NumPy."""
    features = torch.tensor(case.features_nchw.astype(_TV_DTYPES[dtype]))
    features.requires_grad_(upstream_nchw is not None)
    rois = torch.tensor(case.rois.astype(_TV_DTYPES[dtype]))
    kwargs = util.op_kwargs(op, case)
    del kwargs["data_format"]
    out = getattr(tv_ops, op)(features, rois, **kwargs)
    grad = None
    if upstream_nchw is not None:
        out.backward(torch.tensor(upstream_nchw.astype(_TV_DTYPES[dtype])))
        grad = np.transpose(features.grad.numpy(), [0, 2, 3, 1])
    return np.transpose(out.detach().numpy(), [0, 2, 3, 1]), grad


def _ours(op, case, dtype, data_format, upstream_nhwc):
    x = tf.cast(util.layout(case.features_nhwc, data_format), dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = util.call(op, x, case.rois, case, data_format=data_format)
    upstream = tf.cast(upstream_nhwc, dtype)
    if data_format == "NCHW":
        upstream = tf.transpose(upstream, [0, 3, 1, 2])
    grad = tape.gradient(y, x, output_gradients=upstream)
    if data_format == "NCHW":
        y = tf.transpose(y, [0, 2, 3, 1])
        grad = tf.transpose(grad, [0, 2, 3, 1])
    return y.numpy(), grad.numpy()


class TorchvisionParityTest(tf.test.TestCase, parameterized.TestCase):
    def setUp(self):
        super().setUp()
        if _SKIP_REASON:
            self.skipTest(_SKIP_REASON)

    @parameterized.product(
        op=util.OP_NAMES,
        dtype=[tf.float32, tf.float64],
        data_format=["NHWC", "NCHW"],
        spatial_scale=[1.0, 0.5],
    )
    def test_forward(self, op, dtype, data_format, spatial_scale):
        for sampling_ratio, aligned in [(-1, False), (2, True), (0, True)]:
            case = util.make_case(
                op,
                seed=1,
                spatial_scale=spatial_scale,
                sampling_ratio=sampling_ratio,
                aligned=aligned,
            )
            upstream = np.ones(util.reference(op, case).shape)
            expected, _ = _torchvision(op, case, dtype)
            got, _ = _ours(op, case, dtype, data_format, upstream)
            nan = np.isnan(expected)
            if op == "ps_roi_align":
                self.assertAllEqual(got[nan], np.zeros(np.count_nonzero(nan)))
            else:
                self.assertFalse(nan.any())
            # Same arithmetic in the same order: equal to the last bit.
            self.assertAllEqual(got[~nan], expected[~nan])

    @parameterized.product(
        op=util.OP_NAMES, dtype=[tf.float32, tf.float64], data_format=["NHWC", "NCHW"]
    )
    def test_backward(self, op, dtype, data_format):
        case = util.make_case(op, seed=2, spatial_scale=0.5, sampling_ratio=2)
        if op == "ps_roi_pool":
            keep = (case.rois[:, 1:].min(axis=1) >= 0) & (
                case.rois[:, 3:].max(axis=1) * case.spatial_scale < 8
            )
            case.rois = case.rois[keep]
        upstream_nhwc = np.random.default_rng(3).standard_normal(
            util.reference(op, case).shape
        )
        _, expected = _torchvision(
            op, case, dtype, np.transpose(upstream_nhwc, [0, 3, 1, 2])
        )
        _, got = _ours(op, case, dtype, data_format, upstream_nhwc)
        tolerance = 1e-5 if dtype == tf.float32 else 1e-12
        self.assertAllClose(got, expected, rtol=tolerance, atol=tolerance)
        self.assertGreater(np.count_nonzero(got), 10)


if __name__ == "__main__":
    tf.test.main()
