"""Sizes beyond 2^31 elements and beyond int64, checked at the shape level
without allocating them: shape functions infer huge static shapes (or fail
clearly), and kernels either handle huge empty tensors (a zero dimension makes
any shape free) or reject outputs and index spaces that overflow with
InvalidArgument before allocating anything.

Every registered op needs an entry in LargeShapesTest.CHECKS."""

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import op_cases
from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()

# Static dims far beyond int32. TensorFlow rejects a placeholder whose known
# dims multiply beyond int64, so specs stay below that and the overflow comes
# from what the ops compute.
BIG = 2**40
MEGA = 2**20
# Two of these overflow int64 (2^124 elements), yet each is a valid dim.
HUGE = 2**62
INT32_MAX = 2**31 - 1


def _traced_shapes(fn, *specs):
    """The static shapes of fn's outputs when traced on `specs`."""
    outputs = tf.function(fn).get_concrete_function(*specs).structured_outputs
    return [t.shape.as_list() for t in tf.nest.flatten(outputs)]


def _huge_empty(dtype=tf.float32):
    """A valid tensor of shape [0, 2^62, 2^62]: no element, no memory."""
    return tf.zeros([0, HUGE, HUGE], dtype)


def _rois(count):
    """`count` valid boxes on image 0 of a 2 x 2 map."""
    return tf.constant([[0, 0, 0, 1, 1]] * count, tf.float32, shape=[count, 5])


def _roi_attrs(op, output_size):
    attrs = {"pooled_height": output_size, "pooled_width": output_size}
    if "align" in op:
        attrs["sampling_ratio"] = 2
    return attrs


class LargeShapesTest(tf.test.TestCase):
    # --- ZeroOut

    def _zero_out(self):
        spec = tf.TensorSpec([BIG, MEGA, None], tf.float32)
        self.assertEqual(_traced_shapes(tfco.zero_out, spec), [[BIG, MEGA, None]])
        self.assertEqual(tfco.zero_out(_huge_empty(), keep=HUGE).shape, [0, HUGE, HUGE])

    # --- MatrixMul

    def _matrix_mul(self):
        def specs(m, n, ta, tb):
            return (
                tf.TensorSpec([None, m] if ta else [m, None], tf.float32),
                tf.TensorSpec([n, None] if tb else [None, n], tf.float32),
            )

        for ta in (False, True):
            for tb in (False, True):

                def product(a, b, ta=ta, tb=tb):
                    return tfco.matrix_mul(a, b, transpose_a=ta, transpose_b=tb)

                side = 2**31 + 1  # m * n = 2^62 + 2^32 + 1 fits int64
                self.assertEqual(
                    _traced_shapes(product, *specs(side, side, ta, tb)),
                    [[side, side]],
                )
                with self.assertRaisesRegex(
                    ValueError,
                    r"MatrixMul: the product \[1099511627776,1099511627776\]: its "
                    r"number of elements overflows int64",
                ):
                    _traced_shapes(product, *specs(BIG, BIG, ta, tb))
                # An empty inner dimension makes both inputs free; the
                # [2^62, 2^62] product of zeros overflows int64.
                a = tf.zeros([0, HUGE] if ta else [HUGE, 0])
                b = tf.zeros([HUGE, 0] if tb else [0, HUGE])
                with self.assertRaisesRegex(
                    tf.errors.InvalidArgumentError,
                    r"MatrixMul: the product \[4611686018427387904, "
                    r"4611686018427387904\]: its number of elements overflows int64",
                ):
                    product(a, b)
        # A product whose size fits int64 but not memory fails cleanly.
        side = 2**31 + 1
        with self.assertRaises(tf.errors.ResourceExhaustedError):
            tfco.matrix_mul(tf.zeros([side, 0]), tf.zeros([0, side]))

    # --- ClipByGlobalNorm, ClipByGlobalNormGrad

    def _clip_by_global_norm(self):
        def clip(huge, small):
            clipped, norm = tfco.clip_by_global_norm([huge, small], 1.0)
            return clipped + [norm]

        specs = [
            tf.TensorSpec([BIG, MEGA, None], tf.float32),
            tf.TensorSpec([None], tf.float32),
        ]
        self.assertEqual(_traced_shapes(clip, *specs), [[BIG, MEGA, None], [None], []])
        huge, norm = clip(_huge_empty(), tf.constant([3.0, 4.0]))[::2]
        self.assertEqual(huge.shape, [0, HUGE, HUGE])
        self.assertEqual(norm.numpy(), 5.0)

    def _clip_by_global_norm_grad(self):
        def grad(t, dclipped):
            dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
                t=[t], clip_norm=1.0, dclipped=[dclipped], dglobal_norm=1.0
            )
            return list(dt) + [dclip_norm]

        specs = [
            tf.TensorSpec([BIG, None, 2**10], tf.float32),
            tf.TensorSpec([None, 2**10, 2**10], tf.float32),
        ]
        self.assertEqual(_traced_shapes(grad, *specs), [[BIG, 2**10, 2**10], []])
        # t and dclipped are each valid; the shape they must share is not.
        with self.assertRaisesRegex(
            ValueError,
            r"dt \[1099511627776,1099511627776\]: its number of elements overflows "
            r"int64",
        ):
            _traced_shapes(
                grad,
                tf.TensorSpec([BIG, None], tf.float32),
                tf.TensorSpec([None, BIG], tf.float32),
            )
        dt, dclip_norm = grad(_huge_empty(), _huge_empty())
        self.assertEqual(dt.shape, [0, HUGE, HUGE])
        self.assertEqual(dclip_norm.numpy(), 0.0)

    # --- CheckNumericsN

    def _check_numerics_n(self):
        def check(x, y):
            return tfco.check_numerics_n([x, y], "large")

        specs = [
            tf.TensorSpec([BIG, MEGA], tf.float16),
            tf.TensorSpec([None, BIG], tf.float64),
        ]
        self.assertEqual(_traced_shapes(check, *specs), [[BIG, MEGA], [None, BIG]])
        x, _ = check(_huge_empty(tf.float16), tf.constant([1.0], tf.float64))
        self.assertEqual(x.shape, [0, HUGE, HUGE])

    # --- RoI ops

    def _roi_forward(self, op):
        raw = getattr(_ops, f"custom_ops_{op}")
        ps = op.startswith("ps_")

        def pooled(features, rois):
            return raw(features, rois, **_roi_attrs(op, 2))

        # K beyond int32 and a 2^60-element feature map (PS ops divide its
        # channels into the 2 x 2 bins).
        specs = [
            tf.TensorSpec([MEGA, 2**10, 2**10, MEGA], tf.float32),
            tf.TensorSpec([BIG, 5], tf.float32),
        ]
        self.assertEqual(
            _traced_shapes(pooled, *specs)[0], [BIG, 2, 2, MEGA // 4 if ps else MEGA]
        )
        # Valid inputs whose pooled output no tensor could have.
        specs[0] = tf.TensorSpec([1, 2, 2, 4 * BIG], tf.float32)
        with self.assertRaisesRegex(
            ValueError,
            r"pooled output \[1099511627776,2,2,\d+\]: its number of elements "
            r"overflows int64",
        ):
            _traced_shapes(pooled, *specs)
        # argmax holds h * W + w in an int32: maps of 2^31 pixels are rejected.
        for data_format, shape in (
            ("NHWC", [0, 2**16, 2**15, 4]),
            ("NCHW", [0, 4, 2**16, 2**15]),
        ):
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError,
                r"features height \* width must be below 2\^31, got 65536 \* 32768",
            ):
                raw(
                    tf.zeros(shape),
                    _rois(0),
                    data_format=data_format,
                    **_roi_attrs(op, 1),
                )
        # Huge and empty: K = 0 boxes on a map with 2^62 channels.
        self.assertEqual(
            tf.nest.flatten(
                raw(tf.zeros([0, 2, 2, HUGE]), _rois(0), **_roi_attrs(op, 2))
            )[0].shape,
            [0, 2, 2, HUGE // 4 if ps else HUGE],
        )
        # K * PH * PW * C overflows int64: for PS ops through the channels of
        # a map with no pixels (C / (PH * PW) = 2^60), for the others through
        # the bins.
        if ps:
            features, output_size = tf.zeros([1, 0, 0, HUGE]), 2
            dims = f"2, 2, {2**60}"
        else:
            features, output_size = tf.zeros([1, 2, 2, 4]), INT32_MAX
            dims = "2147483647, 2147483647, 4"
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            rf"pooled output \[4, {dims}\]: its number of elements overflows int64",
        ):
            raw(features, _rois(4), **_roi_attrs(op, output_size))
        if ps:
            return  # PS outputs are never larger than the features
        # 2^62 elements fit int64 but not memory: a clean allocation failure.
        with self.assertRaises(tf.errors.ResourceExhaustedError):
            raw(tf.zeros([1, 2, 2, 1]), _rois(1), **_roi_attrs(op, INT32_MAX))

    def _roi_grad(self, op):
        raw = getattr(_ops, f"custom_ops_{op}")

        def grad(grads, features_shape, **attrs):
            extra = {}
            if op == "roi_pool_grad":
                # Cast, not zeros_like: an int32 Shape cannot hold 2^31 - 1.
                extra["argmax"] = tf.cast(grads, tf.int32)
            return raw(
                grads=grads,
                rois=_rois(0),
                features_shape=features_shape,
                **extra,
                **attrs,
            )

        def traced(features_shape):
            return _traced_shapes(
                lambda g: grad(g, tf.constant(features_shape), **_roi_attrs(op, 1)),
                tf.TensorSpec([None, 1, 1, None], tf.float32),
            )

        # The shape comes from features_shape's value, each dim below 2^31;
        # 2^63 - 2^32 elements still fit int64, (2^31 - 1)^3 do not.
        fits = [INT32_MAX, 2**15, 2**15, 4]
        self.assertEqual(traced(fits), [fits])
        overflows = [INT32_MAX, INT32_MAX, 1, INT32_MAX]
        with self.assertRaisesRegex(
            ValueError,
            r"features_shape \[2147483647,2147483647,1,2147483647\]: its number "
            r"of elements overflows int64",
        ):
            traced(overflows)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"features_shape \[2147483647, 2147483647, 1, 2147483647\]: its number "
            r"of elements overflows int64",
        ):
            grad(tf.zeros([0, 1, 1, INT32_MAX]), overflows, **_roi_attrs(op, 1))
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"features_shape height \* width must be below 2\^31",
        ):
            grad(tf.zeros([0, 1, 1, 4]), [1, 2**16, 2**15, 4], **_roi_attrs(op, 1))
        # Huge and empty: the gradient of a map with no images.
        empty_shape = [0, 2**15, 2**15, INT32_MAX]
        self.assertEqual(
            grad(
                tf.zeros([0, 1, 1, INT32_MAX]), empty_shape, **_roi_attrs(op, 1)
            ).shape,
            empty_shape,
        )

    CHECKS = {
        "CustomOps>ZeroOut": _zero_out,
        "CustomOps>MatrixMul": _matrix_mul,
        "CustomOps>ClipByGlobalNorm": _clip_by_global_norm,
        "CustomOps>ClipByGlobalNormGrad": _clip_by_global_norm_grad,
        "CustomOps>CheckNumericsN": _check_numerics_n,
        **{
            f"CustomOps>{name}": (lambda self, op=op: self._roi_forward(op))
            for name, op in (
                ("RoiPool", "roi_pool"),
                ("RoiAlign", "roi_align"),
                ("PsRoiPool", "ps_roi_pool"),
                ("PsRoiAlign", "ps_roi_align"),
            )
        },
        **{
            f"CustomOps>{name}Grad": (lambda self, op=op: self._roi_grad(op + "_grad"))
            for name, op in (
                ("RoiPool", "roi_pool"),
                ("RoiAlign", "roi_align"),
                ("PsRoiPool", "ps_roi_pool"),
                ("PsRoiAlign", "ps_roi_align"),
            )
        },
    }

    def test_every_registered_op(self):
        missing = sorted(op_cases.registered_ops() - set(self.CHECKS))
        self.assertEqual(missing, [], "registered ops without a large-shape check")
        for op, check in sorted(self.CHECKS.items()):
            with self.subTest(op=op):
                check(self)

    def test_attr_beyond_int32_is_rejected_when_the_graph_is_built(self):
        # output_size is an int attr read as int32 by the shape function.
        with self.assertRaisesRegex(ValueError, "out of range for an int32"):
            _traced_shapes(
                lambda f, r: tfco.roi_align(f, r, 2**31),
                tf.TensorSpec([1, 2, 2, 1], tf.float32),
                tf.TensorSpec([1, 5], tf.float32),
            )


if __name__ == "__main__":
    tf.test.main()
