"""Tests of CustomOps>DeformableConv2d and its gradient op: values against a
NumPy reference and tf.nn.conv2d in every dtype and layout, float64 numeric
gradients, torchvision's offset gradient on the padding edge, NaN and
infinite offsets, empty batches, graph, eager and tf.function modes, and
argument errors. The registry entry adds the cross-op checks (determinism,
threads, large shapes, the C++ gradient, fuzzing, goldens);
deform_conv2d_torchvision_parity_test compares with torchvision."""

import contextlib

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import xla_test_util
from tensorflow_customops.python.kernel_tests.deform_conv2d import (
    deform_conv2d_reference as ref,
)
from tensorflow_customops.python.ops import deform_conv2d_ops, load_library, op_specs

_ops = load_library.load_op_library()
_DTYPES = op_specs.allowed_dtypes("CustomOps>DeformableConv2d")
# Against the float64 reference: half and bfloat16 round their inputs.
_TOLERANCE = {
    tf.float16: 2e-2,
    tf.bfloat16: 1.5e-1,
    tf.float32: 1e-5,
    tf.float64: 1e-12,
}


def _nchw(a):
    return None if a is None else tf.transpose(a, [0, 3, 1, 2])


def _nhwc(a):
    return tf.transpose(a, [0, 2, 3, 1])


def _call(case, dtype=tf.float64, data_format="NHWC", **overrides):
    """tfco.deform_conv2d of the case, NHWC out."""
    cast = [
        None if a is None else tf.constant(a, dtype)
        for a in (case.input, case.offset, case.filter, case.mask)
    ]
    x, offset, filt, mask = cast
    if data_format == "NCHW":
        x, offset, mask = _nchw(x), _nchw(offset), _nchw(mask)
    kwargs = dict(case.kwargs(), **overrides)
    y = tfco.deform_conv2d(
        x, offset, filt, mask=mask, data_format=data_format, **kwargs
    )
    return _nhwc(y) if data_format == "NCHW" else y


class DeformConv2dTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(
        data_format=["NHWC", "NCHW"],
        config=[
            dict(strides=1, padding="VALID", dilations=1, groups=1),
            dict(strides=2, padding="SAME", dilations=1, groups=2),
            dict(strides=(1, 2), padding="SAME", dilations=(2, 1), groups=1),
            dict(strides=1, padding=(1, 2), dilations=2, groups=4),
        ],
    )
    def test_zero_offsets_and_unit_mask_equal_conv2d(self, data_format, config):
        rng = np.random.default_rng(3)
        groups = config["groups"]
        x = tf.constant(rng.normal(size=(2, 7, 8, 4)))
        w = tf.constant(rng.normal(size=(3, 2, 4 // groups, 4)))
        pad = config["padding"]
        conv_padding = (
            pad
            if isinstance(pad, str)
            else [[0, 0], [pad[0]] * 2, [pad[1]] * 2, [0, 0]]
        )
        want = tf.nn.conv2d(
            x, w, config["strides"], conv_padding, dilations=config["dilations"]
        )
        _, ho, wo, _ = want.shape
        offset = tf.zeros([2, ho, wo, 12], tf.float64)
        mask = tf.ones([2, ho, wo, 6], tf.float64)
        kwargs = dict(
            strides=config["strides"],
            padding=pad,
            dilations=config["dilations"],
            data_format=data_format,
        )
        if data_format == "NCHW":
            x, offset, mask = _nchw(x), _nchw(offset), _nchw(mask)
        for m in (mask, None):
            got = tfco.deform_conv2d(x, offset, w, mask=m, **kwargs)
            if data_format == "NCHW":
                got = _nhwc(got)
            self.assertAllClose(got, want, rtol=1e-12, atol=1e-12)

    @parameterized.product(
        dtype=_DTYPES, data_format=["NHWC", "NCHW"], mask=[True, False]
    )
    def test_values_against_reference(self, dtype, data_format, mask):
        case = ref.make_case(1, mask=mask)
        if dtype in (tf.float16, tf.bfloat16):
            # The reference sees the rounded inputs the kernel sees.
            for field in ("input", "offset", "filter", "mask"):
                value = getattr(case, field)
                if value is not None:
                    rounded = tf.cast(tf.cast(value, dtype), tf.float64).numpy()
                    setattr(case, field, rounded)
        got = _call(case, dtype, data_format)
        self.assertEqual(got.dtype, dtype)
        want = ref.forward(case)
        tol = _TOLERANCE[dtype]
        self.assertAllClose(
            tf.cast(got, tf.float64), want, rtol=tol, atol=tol * np.abs(want).max()
        )

    @parameterized.parameters(
        dict(kernel=(1, 1), groups=1, offset_groups=1, c=1, o=1),
        dict(kernel=(2, 3), groups=1, offset_groups=2, c=2, o=3),
        dict(kernel=(3, 1), groups=2, offset_groups=1, c=2, o=2),
    )
    def test_reference_cases(self, kernel, groups, offset_groups, c, o):
        case = ref.make_case(
            2,
            c=c,
            o=o,
            kernel=kernel,
            groups=groups,
            offset_groups=offset_groups,
            strides=(1, 1),
            padding=(0, 1, 1, 0),
            dilations=(1, 1),
        )
        self.assertAllClose(_call(case), ref.forward(case), rtol=1e-12, atol=1e-12)

    @parameterized.product(
        data_format=["NHWC", "NCHW"],
        config=[
            dict(groups=1, offset_groups=1, mask=True),
            dict(groups=2, offset_groups=2, mask=True),
            dict(groups=1, offset_groups=2, mask=False),
        ],
    )
    def test_gradients_match_numeric_jacobians(self, data_format, config):
        case = ref.make_case(
            4,
            n=1,
            c=2,
            h=4,
            w=4,
            o=2,
            kernel=(2, 3),
            groups=config["groups"],
            offset_groups=config["offset_groups"],
            strides=(1, 2),
            padding=(1, 0, 1, 1),
            dilations=(1, 1),
            mask=config["mask"],
            offset_scale=0.7,
        )
        fmt = _nchw if data_format == "NCHW" else (lambda a: a)
        inputs = [tf.constant(case.input), tf.constant(case.offset)]
        inputs.append(tf.constant(case.filter))
        if config["mask"]:
            inputs.append(tf.constant(case.mask))

        def f(x, offset, filt, mask=None):
            return tfco.deform_conv2d(
                fmt(x),
                fmt(offset),
                filt,
                mask=None if mask is None else fmt(mask),
                data_format=data_format,
                **case.kwargs(),
            )

        theoretical, numerical = tf.test.compute_gradient(f, inputs, delta=1e-6)
        for t, n in zip(theoretical, numerical):
            self.assertAllClose(t, n, rtol=1e-6, atol=1e-6)

    def test_offset_gradient_on_the_padding_edge(self):
        """Zero offsets with padding put samples exactly on row and column -1
        (and on whole pixels): the offset gradient is the one-sided derivative
        from above, as torchvision's (vision#6885), not zero."""
        case = ref.make_case(
            5,
            n=1,
            c=2,
            h=4,
            w=4,
            o=2,
            kernel=(3, 3),
            groups=1,
            offset_groups=1,
            strides=(1, 1),
            padding=(1, 1, 1, 1),
            dilations=(1, 1),
        )
        case.offset = np.zeros_like(case.offset)
        upstream = np.random.default_rng(6).normal(size=(1, 4, 4, 2))
        offset = tf.constant(case.offset)
        with tf.GradientTape() as tape:
            tape.watch(offset)
            loss = tf.reduce_sum(
                tfco.deform_conv2d(
                    tf.constant(case.input),
                    offset,
                    tf.constant(case.filter),
                    mask=tf.constant(case.mask),
                    **case.kwargs(),
                )
                * upstream
            )
        grad = tape.gradient(loss, offset).numpy()
        delta = 1e-7
        base = np.sum(ref.forward(case) * upstream)
        for index in np.ndindex(*case.offset.shape):
            case.offset[index] = delta
            forward_difference = (np.sum(ref.forward(case) * upstream) - base) / delta
            case.offset[index] = 0.0
            self.assertAllClose(grad[index], forward_difference, rtol=1e-5, atol=1e-6)
        # Tap (0, 1) of output (0, 1) samples row -1: its dy gradient is not 0.
        self.assertNotAllClose(grad[0, 0, 1, 2], 0.0)

    def test_nan_and_infinite_offsets(self):
        case = ref.make_case(7, n=1, offset_groups=1, groups=1)
        offset = case.offset.copy()
        offset[0, 0, 0, 0] = np.nan  # tap 0 of pixel (0, 0)
        offset[0, 1, 0, 2] = np.inf  # tap 1 of pixel (1, 0)
        offset[0, 1, 1, 3] = -np.inf  # tap 1 of pixel (1, 1)
        masked = case.mask.copy()
        masked[0, 1, 0, 1] = 0.0
        masked[0, 1, 1, 1] = 0.0
        inputs = [tf.constant(a) for a in (case.input, offset, case.filter)]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = tfco.deform_conv2d(
                *inputs, mask=tf.constant(case.mask), **case.kwargs()
            )
        self.assertTrue(np.all(np.isnan(y[0, 0, 0])))
        # An infinite offset lands outside the map: the tap reads 0.
        finite = offset.copy()
        finite[np.isinf(finite)] = 0.0
        finite[0, 0, 0, 0] = 0.0
        case.offset, case.mask = finite, masked
        want = ref.forward(case)
        want[0, 0, 0] = np.nan
        self.assertAllClose(y, want, rtol=1e-12, atol=1e-12)
        grad_input, grad_offset, grad_filter = tape.gradient(y, inputs)
        self.assertTrue(np.all(np.isfinite(grad_input)))
        self.assertTrue(np.all(np.isnan(grad_offset[0, 0, 0, :2])))
        self.assertAllEqual(grad_offset[0, 1, 0, 2:4], [0.0, 0.0])
        self.assertAllEqual(grad_offset[0, 1, 1, 2:4], [0.0, 0.0])
        # Tap (0, 0) of pixel (0, 0) is NaN in every channel: so is the
        # filter gradient of that tap, and only of that tap.
        self.assertTrue(np.all(np.isnan(grad_filter[0, 0])))
        self.assertTrue(np.all(np.isfinite(grad_filter[1:])))

    @parameterized.parameters("NHWC", "NCHW")
    def test_empty_batch_gives_empty_output_and_zero_gradients(self, data_format):
        case = ref.make_case(8, n=0)
        inputs = [tf.constant(a) for a in (case.input, case.offset, case.filter)]
        mask = tf.constant(case.mask)
        fmt = _nchw if data_format == "NCHW" else (lambda a: a)
        with tf.GradientTape() as tape:
            tape.watch(inputs + [mask])
            y = tfco.deform_conv2d(
                fmt(inputs[0]),
                fmt(inputs[1]),
                inputs[2],
                mask=fmt(mask),
                data_format=data_format,
                **case.kwargs(),
            )
        self.assertEqual(y.shape.num_elements(), 0)
        grads = tape.gradient(y, inputs + [mask])
        for g, x in zip(grads, inputs + [mask]):
            self.assertEqual(g.shape, x.shape)
            self.assertAllEqual(g, tf.zeros_like(x))

    def test_bias_is_added_after_the_convolution(self):
        case = ref.make_case(9)
        bias = np.arange(6.0)
        for data_format in ("NHWC", "NCHW"):
            got = _call(case, data_format=data_format, bias=tf.constant(bias))
            self.assertAllClose(got, ref.forward(case) + bias, rtol=1e-12, atol=1e-12)

    def test_graph_mode(self):
        case = ref.make_case(10)
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float64, [None, None, None, 4])
            y = tfco.deform_conv2d(
                x,
                tf.constant(case.offset),
                tf.constant(case.filter),
                mask=tf.constant(case.mask),
                **case.kwargs(),
            )
            self.assertEqual(y.shape.as_list(), [2, 2, 7, 6])
            with tf.compat.v1.Session() as sess:
                got = sess.run(y, {x: case.input})
        self.assertAllClose(got, ref.forward(case), rtol=1e-12, atol=1e-12)

    def test_tf_function_with_unknown_shapes(self):
        case = ref.make_case(11)
        spec = tf.TensorSpec([None, None, None, None], tf.float64)
        fn = tf.function(
            lambda x, offset, mask: tfco.deform_conv2d(
                x, offset, tf.constant(case.filter), mask=mask, **case.kwargs()
            ),
            input_signature=[spec, tf.TensorSpec([None, None, None, 24], tf.float64)]
            + [spec],
        )
        concrete = fn.get_concrete_function()
        self.assertEqual(concrete.structured_outputs.shape.as_list(), [None] * 3 + [6])
        got = fn(case.input, case.offset, case.mask)
        self.assertAllClose(got, ref.forward(case), rtol=1e-12, atol=1e-12)

    def test_offset_groups_read_at_run_time(self):
        """With offset's channels unknown while tracing, the op reads
        offset_groups from them at run time."""
        case = ref.make_case(16)
        spec = tf.TensorSpec([None] * 4, tf.float64)
        fn = tf.function(
            lambda x, offset, filt, mask: tfco.deform_conv2d(
                x, offset, filt, mask=mask, **case.kwargs()
            ),
            input_signature=[spec] * 4,
        )
        args = (case.input, case.offset, case.filter, case.mask)
        self.assertAllClose(fn(*args), ref.forward(case), rtol=1e-12, atol=1e-12)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"offset \[2, 2, 7, 18\] must have a positive multiple of 2 \* kh \* kw",
        ):
            fn(case.input, case.offset[..., :18], case.filter, case.mask[..., :9])
        three_groups = np.concatenate([case.offset, case.offset[..., :12]], -1)
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"input channels \(4\) must be a multiple of offset_groups \(3\)",
        ):
            fn(case.input, three_groups, case.filter, case.mask[..., :18])

    def test_static_shapes(self):
        x = tf.TensorSpec([3, 9, 10, 4], tf.float32)
        offset = tf.TensorSpec([None, None, None, 18], tf.float32)
        fn = tf.function(
            lambda x, o: tfco.deform_conv2d(
                x, o, tf.zeros([3, 3, 4, 5]), strides=2, padding="SAME"
            )
        )
        self.assertEqual(
            fn.get_concrete_function(x, offset).structured_outputs.shape, [3, 5, 5, 5]
        )

    def test_second_order_raises(self):
        case = ref.make_case(12, n=1)
        x, offset, filt, mask = (
            tf.constant(a) for a in (case.input, case.offset, case.filter, case.mask)
        )

        def second_order(x, upstream=None):
            with tf.GradientTape() as outer:
                outer.watch(x)
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    y = tfco.deform_conv2d(x, offset, filt, mask=mask, **case.kwargs())
                    loss = tf.reduce_sum(y * y)
                grad = inner.gradient(loss, x)
            return outer.gradient(grad, x, output_gradients=upstream)

        message = deform_conv2d_ops.SECOND_ORDER_ERROR
        # Eagerly the plain message; in a graph, CheckCondition's (the same).
        with self.assertRaises(tf.errors.InvalidArgumentError) as ctx:
            second_order(x)
        self.assertEqual(ctx.exception.message, message)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            tf.function(second_order)(x)
        # Under jit, ones flowing in are known when XLA compiles: the
        # compilation fails, on either lowering.
        for hlo in (False, True):
            with xla_test_util.hlo_lowering() if hlo else contextlib.nullcontext():
                with self.subTest(hlo=hlo):
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, message
                    ):
                        tf.function(second_order, jit_compile=True)(x)
        # An upstream gradient known at run time only: the custom call raises,
        # and zeros give zeros; the HLO lowering cannot raise and gives zeros.
        upstream = tf.ones_like(x)
        if xla_test_util.custom_calls():
            jit = tf.function(second_order, jit_compile=True)
            with self.assertRaisesRegex(xla_test_util.data_error(), message):
                jit(x, upstream)
            self.assertAllEqual(jit(x, 0 * upstream), tf.zeros_like(x))
        with xla_test_util.hlo_lowering():
            jit = tf.function(second_order, jit_compile=True)
            self.assertAllEqual(jit(x, upstream), tf.zeros_like(x))

    def test_wrapper_errors(self):
        case = ref.make_case(13)
        x, offset, filt = (
            tf.constant(a) for a in (case.input, case.offset, case.filter)
        )
        call = tfco.deform_conv2d
        with self.assertRaisesRegex(TypeError, "strides must be an int or a pair"):
            call(x, offset, filt, strides=(1, 2, 3))
        with self.assertRaisesRegex(ValueError, "dilations must be positive"):
            call(x, offset, filt, dilations=0)
        with self.assertRaisesRegex(ValueError, "padding must be 'SAME', 'VALID'"):
            call(x, offset, filt, padding="FULL")
        with self.assertRaisesRegex(ValueError, r"padding must be in \[0, 2\*\*31\)"):
            call(x, offset, filt, padding=-1)
        with self.assertRaisesRegex(
            TypeError, "padding must be 'SAME', 'VALID', an int"
        ):
            call(x, offset, filt, padding=(1, 2, 3))
        with self.assertRaisesRegex(ValueError, "data_format must be"):
            call(x, offset, filt, data_format="NWHC")
        with self.assertRaisesRegex(
            TypeError, "input must be float16, bfloat16, float32 or float64, got int32"
        ):
            call(tf.zeros([1, 4, 4, 4], tf.int32), offset, filt)
        with self.assertRaisesRegex(TypeError, "offset must have input's dtype"):
            call(x, tf.cast(offset, tf.float32), filt)
        with self.assertRaisesRegex(TypeError, "mask must have input's dtype"):
            call(x, offset, filt, mask=tf.ones([2, 3, 5, 12], tf.float32))
        with self.assertRaisesRegex(ValueError, "filter must have rank 4"):
            call(x, offset, filt[0])
        with self.assertRaisesRegex(
            ValueError, r"offset must have 2 \* offset_groups \* kh \* kw channels"
        ):
            call(x, offset[..., :5], filt)
        for empty in ([0, 3, 4, 6], [3, 0, 4, 6], [3, 2, 0, 6]):
            with self.assertRaisesRegex(
                ValueError,
                r"^filter must have positive height, width and input channels, "
                rf"got shape \({', '.join(map(str, empty))}\)$",
            ):
                call(x, offset, tf.zeros(empty, tf.float64))
        with self.assertRaisesRegex(ValueError, "bias must have rank 1"):
            call(x, offset, filt, bias=tf.zeros([1, 6], tf.float64), **case.kwargs())

    def test_shape_errors_name_the_argument(self):
        case = ref.make_case(14)
        x, offset, filt, mask = (
            tf.constant(a) for a in (case.input, case.offset, case.filter, case.mask)
        )
        kwargs = case.kwargs()
        errors = (ValueError, tf.errors.InvalidArgumentError)
        cases = [
            (
                dict(offset=offset[:1]),
                r"offset \[1, 2, 7, 24\] must have batch size 2 \(the input's\), "
                r"got 1(?!\d)",
            ),
            (
                dict(offset=offset[:, :1]),
                r"offset .* must have height 2 \(the output's\)",
            ),
            (
                dict(offset=offset[:, :, :4]),
                r"offset .* must have width 7 \(the output's\)",
            ),
            (
                dict(mask=mask[..., :6]),
                r"mask .* must have channel count 12 \(offset_groups \* kh \* kw\), "
                r"got 6",
            ),
            (dict(mask=mask[:, :, :1]), r"mask .* must have width 7 \(the output's\)"),
            (
                dict(filter=tf.zeros([3, 2, 3, 6], tf.float64)),
                r"input channels \(4\) must be a multiple of filter's input",
            ),
            (
                dict(filter=tf.zeros([3, 2, 2, 5], tf.float64)),
                r"filter's output channels \(5\) must be a multiple of groups",
            ),
            (
                dict(
                    filter=tf.zeros([1, 1, 2, 6], tf.float64),
                    offset=tf.zeros([2, 3, 5, 6], tf.float64),
                    mask=None,
                ),
                r"input channels \(4\) must be a multiple of offset_groups \(3\)",
            ),
            (
                dict(padding=0),
                r"offset \[2, 2, 7, 24\] must have width 4 \(the output's\)",
            ),
        ]
        for overrides, message in cases:
            args = dict(input=x, offset=offset, filter=filt, mask=mask)
            args.update((k, v) for k, v in overrides.items() if k != "padding")
            call_kwargs = dict(kwargs)
            if "padding" in overrides:
                call_kwargs["padding"] = overrides["padding"]
            with self.subTest(message=message):
                with self.assertRaisesRegex(errors, message):
                    tfco.deform_conv2d(**args, **call_kwargs)

    def test_kernel_errors(self):
        """The kernels check what only the raw op can get wrong."""
        raw = _ops.custom_ops_deformable_conv2d
        x = tf.zeros([1, 4, 4, 2])
        w = tf.zeros([3, 3, 2, 2])
        offset = tf.zeros([1, 2, 2, 18])
        mask = tf.zeros([1, 2, 2, 9])
        err = tf.errors.InvalidArgumentError
        with self.assertRaisesRegex(err, "strides must be 1 in the batch"):
            raw(x, w, offset, mask, strides=[2, 1, 1, 1])
        with self.assertRaisesRegex(err, "strides must have 4 entries"):
            raw(x, w, offset, mask, strides=[1, 1])
        with self.assertRaisesRegex(err, "dilations must be positive"):
            raw(x, w, offset, mask, dilations=[1, 0, 1, 1])
        with self.assertRaisesRegex(err, "explicit_paddings must have 8 entries"):
            raw(x, w, offset, mask, padding="EXPLICIT", explicit_paddings=[1, 1])
        with self.assertRaisesRegex(err, "explicit_paddings must be empty unless"):
            raw(x, w, offset, mask, explicit_paddings=[0] * 8)
        with self.assertRaisesRegex(err, "explicit_paddings must be 0 in the batch"):
            raw(x, w, offset, mask, padding="EXPLICIT", explicit_paddings=[1] * 8)
        with self.assertRaisesRegex(err, "offset_groups must be positive, or 0"):
            raw(x, w, offset, mask, offset_groups=-1)
        with self.assertRaisesRegex(err, r"must have a positive multiple of 2 \* kh"):
            raw(x, w, offset[..., :10], mask, offset_groups=0)
        with self.assertRaisesRegex(err, "mask must be empty when use_mask is false"):
            raw(x, w, offset, mask, use_mask=False)
        with self.assertRaisesRegex(err, "mask must have rank 4"):
            raw(x, w, offset, tf.zeros([9]))
        with self.assertRaisesRegex(err, "is less than the dilated filter's"):
            raw(x, w, offset, mask, dilations=[1, 3, 1, 1])
        with self.assertRaisesRegex(err, "filter .* must have positive height"):
            raw(x, tf.zeros([0, 3, 2, 2]), offset, mask)
        with self.assertRaisesRegex(err, "grad_output .* must have the shape of the"):
            _ops.custom_ops_deformable_conv2d_grad(
                x, w, offset, mask, tf.zeros([1, 2, 3, 2])
            )

    def test_unmasked_equals_unit_mask(self):
        case = ref.make_case(15, mask=False)
        unmasked = _call(case)
        case.mask = np.ones(case.offset.shape[:3] + (12,))
        self.assertAllEqual(unmasked, _call(case))


if __name__ == "__main__":
    tf.test.main()
