"""Forward tests of the RoI ops against the NumPy reference: values for every
dtype and layout, box layouts, shapes, modes and XLA."""

import dataclasses
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import test_util

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import xla_test_util
from tensorflow_customops.python.kernel_tests.roi import roi_reference
from tensorflow_customops.python.kernel_tests.roi import roi_test_util as util
from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()


class RoiOpsTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(
        op=util.OP_NAMES,
        spatial_scale=[1.0, 0.5, 0.25],
        data_format=["NHWC", "NCHW"],
        seed=[0, 1],
    )
    def test_matches_reference_in_float64(self, op, spatial_scale, data_format, seed):
        case = util.make_case(op, seed=seed, spatial_scale=spatial_scale)
        got = util.run_op(op, case, data_format=data_format, dtype=tf.float64)
        self.assertAllClose(got, util.reference(op, case), rtol=1e-12, atol=1e-12)

    @parameterized.product(op=util.OP_NAMES, data_format=["NHWC", "NCHW"])
    def test_matches_reference_in_float32(self, op, data_format):
        case = util.make_case(op, seed=2, spatial_scale=0.5)
        got = util.run_op(op, case, data_format=data_format, dtype=tf.float32)
        self.assertAllClose(got, util.reference(op, case), rtol=1e-5, atol=1e-5)

    @parameterized.product(op=util.OP_NAMES, dtype=[tf.float16, tf.bfloat16])
    def test_half_and_bfloat16_accumulate_in_float(self, op, dtype):
        case = util.make_case(op, seed=3, spatial_scale=0.5)
        got = util.run_op(op, case, dtype=dtype)
        tolerance = 1e-2 if dtype == tf.float16 else 4e-2
        self.assertAllClose(
            got, util.reference(op, case), rtol=tolerance, atol=tolerance
        )

    @parameterized.product(
        op=util.OP_NAMES, dtype=[tf.float16, tf.bfloat16, tf.float32, tf.float64]
    )
    def test_nchw_equals_nhwc_bitwise(self, op, dtype):
        case = util.make_case(op, seed=4, spatial_scale=0.5)
        nhwc = util.run_op(op, case, data_format="NHWC", dtype=dtype)
        nchw = util.run_op(op, case, data_format="NCHW", dtype=dtype)
        self.assertAllEqual(nhwc, nchw)

    @parameterized.product(sampling_ratio=[-1, 0, 1, 3], aligned=[False, True])
    def test_roi_align_sampling(self, sampling_ratio, aligned):
        case = util.make_case(
            "roi_align",
            seed=5,
            spatial_scale=0.5,
            sampling_ratio=sampling_ratio,
            aligned=aligned,
        )
        got = util.run_op("roi_align", case, dtype=tf.float64)
        self.assertAllClose(got, util.reference("roi_align", case), atol=1e-12)

    @parameterized.parameters(-1, 2)
    def test_ps_roi_align_sampling(self, sampling_ratio):
        case = util.make_case(
            "ps_roi_align", seed=6, spatial_scale=0.5, sampling_ratio=sampling_ratio
        )
        got = util.run_op("ps_roi_align", case, dtype=tf.float64)
        self.assertAllClose(got, util.reference("ps_roi_align", case), atol=1e-12)

    @parameterized.product(sampling_ratio=[-1, 2], data_format=["NHWC", "NCHW"])
    def test_ps_roi_align_unaligned(self, sampling_ratio, data_format):
        # The attr added in PsRoiAlign's second version.
        case = util.make_case("ps_roi_align", seed=18, spatial_scale=0.5)
        features = util.layout(case.features_nhwc, data_format)
        got = tfco.ps_roi_align(
            features,
            case.rois,
            case.output_size,
            case.spatial_scale,
            sampling_ratio,
            aligned=False,
            data_format=data_format,
        )
        if data_format == "NCHW":
            got = tf.transpose(got, [0, 2, 3, 1])
        expected = roi_reference.ps_roi_align(
            case.features_nchw,
            case.rois,
            case.output_size,
            case.spatial_scale,
            sampling_ratio,
            aligned=False,
        )
        self.assertAllClose(got, np.transpose(expected, [0, 2, 3, 1]), atol=1e-12)
        self.assertNotAllClose(
            got, util.run_op("ps_roi_align", case, dtype=tf.float64), atol=1e-3
        )

    @parameterized.product(
        op=sorted(util.SAMPLING),
        sampling_ratio=[-1, 2],
        aligned=[False, True],
        data_format=["NHWC", "NCHW"],
    )
    def test_boxes_sliding_off_the_map(self, op, sampling_ratio, aligned, data_format):
        # The kernels write zeros for a box none of whose samples can land on
        # the map; a box with one sample on it must still pool it.
        case = util.sliding_off_case(op, sampling_ratio, aligned)
        got = util.run_op(op, case, data_format=data_format, dtype=tf.float64)
        expected = util.reference(op, case)
        self.assertAllClose(got, expected, rtol=1e-12, atol=1e-12)
        zero = np.all(expected == 0, axis=(1, 2, 3))
        self.assertTrue(zero.any() and not zero.all())

    def test_roi_pool_argmax(self):
        case = util.make_case("roi_pool", seed=7, spatial_scale=0.5)
        features = tf.constant(case.features_nhwc)
        _, argmax = tfco.python.ops.roi_ops._ops.custom_ops_roi_pool(
            features,
            case.rois,
            pooled_height=case.output_size[0],
            pooled_width=case.output_size[1],
            spatial_scale=case.spatial_scale,
        )
        _, expected = roi_reference.roi_pool(
            case.features_nchw, case.rois, case.output_size, case.spatial_scale
        )
        self.assertEqual(argmax.dtype, tf.int32)
        self.assertAllEqual(argmax, np.transpose(expected, [0, 2, 3, 1]))
        # Empty bins (boxes entirely off the map) have argmax -1 and output 0.
        self.assertIn(-1, argmax.numpy())

    @parameterized.parameters(util.OP_NAMES)
    def test_per_image_box_lists(self, op):
        case = util.make_case(op, seed=8, spatial_scale=0.5)
        boxes = [case.rois[case.rois[:, 0] == n][:, 1:] for n in range(case.batch)]
        order = np.argsort(case.rois[:, 0], kind="stable")
        expected = util.run_op(op, case, dtype=tf.float32)[order]
        got = util.call(op, tf.constant(case.features_nhwc, tf.float32), boxes, case)
        self.assertIsInstance(got, tf.RaggedTensor)
        self.assertAllEqual(got.row_lengths(), [len(b) for b in boxes])
        self.assertAllEqual(got.flat_values, expected)

    @parameterized.product(op=util.OP_NAMES, data_format=["NHWC", "NCHW"])
    def test_float64_boxes_match_reference_in_float64(self, op, data_format):
        # Coordinates float32 cannot hold: the kernels compute float64 boxes
        # with float64 features in float64.
        case = util.float64_boxes_case(op, seed=9)
        got = util.run_op(op, case, data_format=data_format, dtype=tf.float64)
        expected = util.reference(op, case)
        self.assertAllClose(got, expected, rtol=1e-12, atol=1e-12)
        if op in util.SAMPLING:
            # The boxes rounded to float32 move the samples, well beyond that.
            rounded = dataclasses.replace(case, rois=case.rois.astype(np.float32))
            off = util.run_op(op, rounded, data_format=data_format, dtype=tf.float64)
            self.assertGreater(np.max(np.abs(off - expected)), 1e-9)

    @parameterized.parameters(util.OP_NAMES)
    def test_float64_boxes_keep_their_dtype_in_every_form(self, op):
        case = util.float64_boxes_case(op, seed=10)
        features = tf.constant(case.features_nhwc)
        expected = util.call(op, features, case.rois, case)
        per_image = [case.rois[case.rois[:, 0] == n][:, 1:] for n in range(case.batch)]
        order = np.argsort(case.rois[:, 0], kind="stable")
        ragged = tf.ragged.constant([b.tolist() for b in per_image], tf.float64, 1)
        for rois in (per_image, ragged):
            got = util.call(op, features, rois, case)
            self.assertAllEqual(got.flat_values, tf.gather(expected, order))
        graph = tf.function(lambda f, r: util.call(op, f, r, case))
        self.assertAllEqual(graph(features, tf.constant(case.rois)), expected)

    @parameterized.parameters(util.OP_NAMES)
    def test_float64_boxes_with_other_features_are_float32(self, op):
        # The wrappers round float64 boxes to float32 for features of lower
        # precision, which compute their boxes in float32.
        case = util.float64_boxes_case(op, seed=11)
        features = tf.constant(case.features_nhwc, tf.float32)
        got = util.call(op, features, case.rois, case)
        expected = util.call(op, features, case.rois.astype(np.float32), case)
        self.assertAllEqual(got, expected)

    @parameterized.parameters(
        ("RoiPool", {}),
        ("RoiAlign", {}),
        ("PsRoiPool", {}),
        ("PsRoiAlign", {}),
        ("RoiPoolGrad", {"argmax": True}),
        ("RoiAlignGrad", {}),
        ("PsRoiPoolGrad", {}),
        ("PsRoiAlignGrad", {}),
        ("RoiAlignGradBoxes", {}),
        ("PsRoiAlignGradBoxes", {}),
    )
    def test_float64_boxes_need_float64_features(self, op, extra):
        features = tf.zeros([1, 4, 4, 4], tf.float32)
        rois = tf.constant([[0, 0, 0, 2, 2]], tf.float64)
        grads = tf.zeros([1, 2, 2, 1 if op.startswith("Ps") else 4], tf.float32)
        attrs = dict(pooled_height=2, pooled_width=2)
        if op.endswith("GradBoxes"):
            inputs = dict(grads=grads, features=features, rois=rois)
        elif op.endswith("Grad"):
            inputs = dict(grads=grads, rois=rois, features_shape=[1, 4, 4, 4])
            if extra:
                inputs["argmax"] = tf.zeros(grads.shape, tf.int32)
        else:
            inputs = dict(features=features, rois=rois)
        raw = getattr(
            _ops, "custom_ops_" + re.sub(r"(?<!^)([A-Z])", r"_\1", op).lower()
        )
        message = re.escape(
            "rois are double (Tboxes) but features are float (T): double rois "
            "need double features"
        )
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            raw(**inputs, **attrs)
        with self.assertRaisesRegex(
            (ValueError, tf.errors.InvalidArgumentError), message
        ):
            tf.function(lambda: raw(**inputs, **attrs)).get_concrete_function()

    @parameterized.parameters(util.OP_NAMES)
    def test_output_size_int_or_pair(self, op):
        case = util.make_case(op, seed=10, output_size=(2, 2))
        features = tf.constant(case.features_nhwc)
        as_int = util.call(op, features, case.rois, case, output_size=2)
        as_pair = util.call(op, features, case.rois, case, output_size=(2, 2))
        self.assertAllEqual(as_int, as_pair)

    @parameterized.product(op=util.OP_NAMES, data_format=["NHWC", "NCHW"])
    def test_no_boxes(self, op, data_format):
        case = util.make_case(op, seed=11)
        features = util.layout(case.features_nhwc, data_format)
        out = util.call(
            op,
            features,
            np.zeros([0, 5], np.float32),
            case,
            data_format=data_format,
        )
        channels = util.pooled_channels(op, case)
        ph, pw = case.output_size
        expected = (
            [0, ph, pw, channels] if data_format == "NHWC" else [0, channels, ph, pw]
        )
        self.assertEqual(out.shape, expected)

    @parameterized.parameters(util.OP_NAMES)
    def test_empty_feature_map_gives_zeros(self, op):
        case = util.make_case(op, seed=12)
        channels = case.features_nhwc.shape[-1]
        for shape in ([2, 0, 5, channels], [2, 5, 0, channels]):
            out = util.call(op, tf.zeros(shape), case.rois, case)
            self.assertAllEqual(out, tf.zeros_like(out))

    @parameterized.parameters(util.OP_NAMES)
    def test_shape_inference(self, op):
        case = util.make_case(op, seed=13)
        ph, pw = case.output_size
        channels = case.features_nhwc.shape[-1]
        out_channels = util.pooled_channels(op, case)
        for data_format in ("NHWC", "NCHW"):
            features_spec = (
                [None, None, None, channels]
                if data_format == "NHWC"
                else [None, channels, None, None]
            )
            fn = tf.function(
                lambda f, r, df=data_format: util.call(op, f, r, case, data_format=df)
            ).get_concrete_function(
                tf.TensorSpec(features_spec, tf.float32),
                tf.TensorSpec([None, 5], tf.float32),
            )
            expected = (
                [None, ph, pw, out_channels]
                if data_format == "NHWC"
                else [None, out_channels, ph, pw]
            )
            self.assertEqual(fn.structured_outputs.shape.as_list(), expected)

    @parameterized.parameters(util.OP_NAMES)
    def test_tf_function_with_unknown_shapes(self, op):
        # Same attrs, different batch, map and box counts: one trace.
        cases = [
            util.make_case(op, seed=14, batch=1, height=6, width=7),
            util.make_case(op, seed=15, batch=3, height=10, width=5),
        ]
        fn = tf.function(
            lambda f, r: util.call(op, f, r, cases[0]),
            input_signature=[
                tf.TensorSpec([None, None, None, None], tf.float32),
                tf.TensorSpec([None, 5], tf.float32),
            ],
        )
        for case in cases:
            got = fn(tf.constant(case.features_nhwc, tf.float32), case.rois)
            self.assertAllEqual(got, util.run_op(op, case, dtype=tf.float32))
        self.assertEqual(fn.experimental_get_tracing_count(), 1)

    @test_util.run_deprecated_v1
    def test_graph_mode_session(self):
        case = util.make_case("roi_align", seed=16, spatial_scale=0.5)
        features = tf.compat.v1.placeholder(tf.float64, [None, None, None, None])
        rois = tf.compat.v1.placeholder(tf.float32, [None, 5])
        out = tfco.roi_align(
            features, rois, case.output_size, case.spatial_scale, aligned=True
        )
        with self.session() as sess:
            got = sess.run(out, {features: case.features_nhwc, rois: case.rois})
        expected = roi_reference.roi_align(
            case.features_nchw,
            case.rois,
            case.output_size,
            case.spatial_scale,
            -1,
            True,
        )
        self.assertAllClose(got, np.transpose(expected, [0, 2, 3, 1]), atol=1e-12)

    _BAD_ROWS = [
        [2, 1, 1, 5, 5],
        [-1, 1, 1, 5, 5],
        [0.5, 1, 1, 5, 5],
        [0, np.nan, 1, 5, 5],
        [0, 1, np.inf, 5, 5],
        [0, 1, 1, 2e11, 5],  # beyond 2^30 pixels at either scale
    ]
    _VALIDATION_CASES = [
        (tfco.roi_align, {"sampling_ratio": 2}),
        (tfco.roi_align, {"sampling_ratio": 0, "spatial_scale": 0.01}),
        (tfco.roi_pool, {}),
        (tfco.ps_roi_align, {"sampling_ratio": 2}),
        (tfco.ps_roi_pool, {}),
    ]
    _GOOD_ROW = [1, 1.0, 1.5, 6.0, 7.0]

    def _validation_features(self):
        return tf.constant(
            np.random.default_rng(3).standard_normal((2, 8, 9, 4)), tf.float32
        )

    def test_xla_raises_the_kernels_errors_for_bad_boxes(self):
        if not xla_test_util.custom_calls():
            self.skipTest("the HLO lowerings cannot raise on data")
        features = self._validation_features()
        for fn, attrs in self._VALIDATION_CASES:
            for row in self._BAD_ROWS:
                with self.subTest(op=fn.__name__, attrs=attrs, row=row):
                    rois = tf.constant([self._GOOD_ROW, row], tf.float32)
                    run = self._forward_and_gradient(fn, dict(attrs, output_size=2))
                    with self.assertRaises(tf.errors.InvalidArgumentError) as eager:
                        run(features, rois)
                    # The kernel's own words, without eager's node and op names.
                    message = re.escape(
                        re.sub(r"^\{\{[^}]*\}\} ", "", eager.exception.message).split(
                            " [Op:"
                        )[0]
                    )
                    jit = tf.function(run, jit_compile=True)
                    with self.assertRaisesRegex(xla_test_util.data_error(), message):
                        jit(features, rois)

    def test_hlo_lowering_zeroes_boxes_that_fail_validation(self):
        # A program of HLO cannot raise on data: a box the regular kernels
        # reject (batch index out of range or fractional, non-finite or huge
        # coordinates) gives zeros and no gradient, and the other boxes are
        # unaffected.
        features = self._validation_features()
        for fn, attrs in self._VALIDATION_CASES:
            for row in self._BAD_ROWS:
                with self.subTest(op=fn.__name__, attrs=attrs, row=row):
                    rois = tf.constant([self._GOOD_ROW, row], tf.float32)
                    run = self._forward_and_gradient(fn, dict(attrs, output_size=2))
                    with xla_test_util.hlo_lowering():
                        pooled, grad = tf.function(run, jit_compile=True)(
                            features, rois
                        )
                    self.assertAllEqual(pooled[1], tf.zeros_like(pooled[1]))
                    alone_pooled, alone_grad = run(features, rois[:1])
                    self.assertAllClose(pooled[:1], alone_pooled, rtol=1e-6, atol=1e-6)
                    self.assertAllClose(grad, alone_grad, rtol=1e-6, atol=1e-6)

    @staticmethod
    def _forward_and_gradient(fn, attrs):
        def run(features, rois):
            with tf.GradientTape() as tape:
                tape.watch(features)
                pooled = fn(features, rois, **attrs)
                weights = tf.cast(tf.range(tf.size(pooled)), pooled.dtype)
                loss = tf.reduce_sum(pooled * tf.reshape(weights, tf.shape(pooled)))
            return pooled, tape.gradient(loss, features)

        return run

    def _roi_pool_grad_with_bad_argmax(self):
        """A jit RoiPoolGrad of an argmax with entries off the 3 x 4 map, and
        the feature gradient of its valid entry alone."""
        grads = tf.ones([1, 1, 1, 3])
        argmax = tf.constant([[[[5, -7, 12]]]], tf.int32)
        rois = tf.constant([[0, 0, 0, 3, 2]], tf.float32)

        def grad(grads, argmax):
            return _ops.custom_ops_roi_pool_grad(
                grads,
                rois,
                argmax,
                [1, 3, 4, 3],
                pooled_height=1,
                pooled_width=1,
                spatial_scale=1.0,
            )

        expected = np.zeros([1, 3, 4, 3], np.float32)
        expected[0, 1, 1, 0] = 1
        return lambda: tf.function(grad, jit_compile=True)(grads, argmax), expected

    def test_xla_raises_on_argmax_entries_off_the_map(self):
        if not xla_test_util.custom_calls():
            self.skipTest("the HLO lowerings cannot raise on data")
        run, _ = self._roi_pool_grad_with_bad_argmax()
        with self.assertRaisesRegex(
            xla_test_util.data_error(),
            r"argmax\[1\] = -7 is not -1 or a pixel index in \[0, 12\)",
        ):
            run()

    def test_hlo_lowering_skips_argmax_entries_off_the_map(self):
        run, expected = self._roi_pool_grad_with_bad_argmax()
        with xla_test_util.hlo_lowering():
            self.assertAllEqual(run(), expected)

    def test_xla_boxes_of_bounded_dynamic_size(self):
        # Boxes from tf.boolean_mask have a dynamic first dimension under XLA;
        # outputs and gradients must be those of the kept boxes, with both
        # lowerings.
        rng = np.random.default_rng(5)
        features = tf.constant(rng.standard_normal((2, 12, 10, 18)), tf.float32)
        rois = tf.constant(
            [[0, 1, 1, 8, 9], [1, 0.5, 2, 7, 11], [0, 3, 3, 3.5, 9], [1, 2, 2, 9, 6]],
            tf.float32,
        )
        keep = tf.constant([True, False, True, True])
        for fn, attrs in self._VALIDATION_CASES:

            def run(features, rois, keep, fn=fn, attrs=attrs):
                with tf.GradientTape(persistent=True) as tape:
                    tape.watch([features, rois])
                    pooled = fn(features, tf.boolean_mask(rois, keep), 3, **attrs)
                    loss = tf.reduce_sum(pooled * pooled)
                return pooled, tape.gradient(loss, [features, rois])

            want = run(features, rois, keep)
            for lowering in ("default", "hlo"):
                with self.subTest(op=fn.__name__, attrs=attrs, lowering=lowering):
                    if lowering == "hlo":
                        with xla_test_util.hlo_lowering():
                            got = tf.function(run, jit_compile=True)(
                                features, rois, keep
                            )
                    else:
                        got = tf.function(run, jit_compile=True)(features, rois, keep)
                    for w, g in zip(tf.nest.flatten(want), tf.nest.flatten(got)):
                        self.assertAllClose(w, g, rtol=1e-5, atol=1e-5)

    def test_xla_independent_calls_run_concurrently(self):
        # XLA may run independent custom calls at once on the intra-op pool,
        # each of which spreads its work over the same pool: none may wait
        # for work that no free thread can start.
        rng = np.random.default_rng(6)
        features = tf.constant(rng.standard_normal((2, 32, 32, 16)), tf.float32)
        rois = tf.constant(
            np.tile([[0, 1, 1, 20, 25], [1, 3, 2, 30, 12]], [32, 1]), tf.float32
        )

        def levels(features, rois):
            return [
                tfco.roi_align(features * (i + 1), rois, 7, sampling_ratio=2)
                for i in range(6)
            ]

        jit = tf.function(levels, jit_compile=True)
        want = levels(features, rois)
        for _ in range(10):
            got = jit(features, rois)
        tolerance = 0 if xla_test_util.custom_calls() else 1e-5
        self.assertAllClose(want, got, rtol=tolerance, atol=tolerance)

    def test_xla_attr_and_shape_errors_match_the_kernels(self):
        features = tf.zeros([1, 4, 4, 8])
        rois = tf.constant([[0, 0, 0, 2, 2]], tf.float32)
        for kwargs, message in [
            ({"spatial_scale": -1.0}, "spatial_scale must be finite and positive"),
            ({"sampling_ratio": 65}, "sampling_ratio must be at most 64"),
        ]:
            with self.subTest(kwargs=kwargs):
                fn = tf.function(
                    lambda f, r, kwargs=kwargs: _ops.custom_ops_roi_align(
                        f, r, pooled_height=2, pooled_width=2, **kwargs
                    ),
                    jit_compile=True,
                )
                # The shape function runs the kernels' attr rules when the
                # function is traced, before XLA compiles it.
                with self.assertRaisesRegex(ValueError, message):
                    fn(features, rois)
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                    _ops.custom_ops_roi_align(
                        features, rois, pooled_height=2, pooled_width=2, **kwargs
                    )


if __name__ == "__main__":
    tf.test.main()
