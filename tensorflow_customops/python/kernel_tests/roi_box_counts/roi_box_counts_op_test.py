"""Per-image box counts (`box_counts` with `[N, K, 4]` boxes) are checked by an
op, CustomOps>RoiBoxCounts, so that invalid counts (negative, above K, not one
per image) and image counts that differ from the features' raise the same
`InvalidArgumentError` eagerly, in graphs, with unknown shapes, under
`jit_compile` (a custom call into the kernel) and in Keras models compiled
with `jit_compile=True`; XLA raises a failed legacy call (TensorFlow 2.12 to
2.19) as an `InternalError` with the message; under jit the custom call also
compares sizes known only at run time (from `tf.boolean_mask`). Under the HLO
lowering, where nothing can raise, the counts are clamped to [0, K]. No jit
compilation of the RoI functions and layers, nor of the library's other
run-time checks (second-order gradients, tfco.gradients), logs "Ignoring
Assert operator" (XLA's note that it drops a check)."""

import contextlib
import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests import xla_test_util
from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()

_FEATURES = np.arange(2 * 6 * 6 * 4, dtype=np.float32).reshape(2, 6, 6, 4) / 100
_BOXES = np.array(
    [
        [[0, 0, 3, 3], [1, 1, 5, 4], [2, 0, 4, 5]],
        [[1, 2, 5, 5], [0, 0, 2, 2], [3, 3, 5, 5]],
    ],
    np.float32,
)
# Counts and the exact message each path must give.
_INVALID = {
    "negative": ([1, -1], "box_counts must not be negative, got [1, -1]"),
    "above_k": ([1, 4], "box_counts must be at most rois.shape[1] (3), got [1, 4]"),
    "beyond_int32": (
        [2**40, 1],
        "box_counts must be at most rois.shape[1] (3), got [1099511627776, 1]",
    ),
    "too_many": (
        [1, 1, 1],
        "box_counts must hold one count per image of rois (2), got 3",
    ),
    "too_few": ([1], "box_counts must hold one count per image of rois (2), got 1"),
}
# The cases whose counts' values are wrong: under jit the custom call, not the
# compilation, raises them.
_RUN_TIME = ("negative", "above_k", "beyond_int32")
_VALID = [[3, 0], [2, 1], [0, 0]]
_FUNCTIONS = ("roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align")


def _pool(name, features, boxes, counts):
    if name == "multi_scale_roi_align":
        # Two levels: one level is roi_align itself.
        return tfco.multi_scale_roi_align(
            [features, features[:, ::2, ::2]],
            boxes,
            2,
            spatial_scales=[1.0, 0.5],
            box_counts=counts,
        )
    return getattr(tfco, name)(features, boxes, 2, box_counts=counts)


def _unknown_shapes(counts_dtype=tf.int64):
    return [
        tf.TensorSpec([None, None, None, 4], tf.float32),
        tf.TensorSpec([None, None, 4], tf.float32),
        tf.TensorSpec([None], counts_dtype),
    ]


def _counts(counts):
    return tf.constant(counts, tf.int64)


def _error(path, case):
    """What `path` raises for the _INVALID `case`."""
    if path.startswith("jit") and case in _RUN_TIME:
        return xla_test_util.data_error()
    return tf.errors.InvalidArgumentError


class RoiBoxCountsOpTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(dtype=[tf.int32, tf.int64], counts=_VALID)
    def test_valid_counts_pass_through(self, dtype, counts):
        counts = tf.constant(counts, dtype)
        run = lambda f, b, c: _ops.custom_ops_roi_box_counts(f, b, c)  # noqa: E731
        for label, fn in (
            ("eager", run),
            ("graph", tf.function(run)),
            ("unknown", tf.function(run, input_signature=_unknown_shapes(dtype))),
            ("jit", tf.function(run, jit_compile=True)),
        ):
            with self.subTest(path=label):
                out = fn(_FEATURES, _BOXES, counts)
                self.assertEqual(out.dtype, dtype)
                self.assertAllEqual(out, counts)

    def test_shapes(self):
        run = tf.function(lambda f, b, c: _ops.custom_ops_roi_box_counts(f, b, c))
        spec = run.get_concrete_function(*_unknown_shapes()).structured_outputs
        self.assertEqual(spec.shape.as_list(), [None])
        with self.assertRaisesRegex(ValueError, "must be rank 3"):
            run(_FEATURES, _BOXES[0], [1, 1])
        # Empty: no images, no counts.
        out = _ops.custom_ops_roi_box_counts(
            tf.zeros([0, 2, 2, 1]), tf.zeros([0, 5, 4]), tf.zeros([0], tf.int32)
        )
        self.assertEqual(out.shape, [0])

    def test_errors_on_every_path(self):
        run = lambda f, b, c: _ops.custom_ops_roi_box_counts(f, b, c)  # noqa: E731
        paths = [
            ("eager", run),
            ("graph", tf.function(run)),
            ("unknown", tf.function(run, input_signature=_unknown_shapes())),
        ]
        if xla_test_util.custom_calls():
            paths.append(("jit", tf.function(run, jit_compile=True)))
        for label, fn in paths:
            for case, (counts, message) in _INVALID.items():
                with self.subTest(path=label, counts=counts):
                    with self.assertRaisesRegex(
                        _error(label, case), re.escape(message)
                    ):
                        fn(_FEATURES, _BOXES, _counts(counts))
            with self.subTest(path=label, images="differ"):
                with self.assertRaisesRegex(
                    tf.errors.InvalidArgumentError,
                    re.escape("rois holds boxes for 2 images but features holds 1"),
                ):
                    fn(_FEATURES[:1], _BOXES, _counts([1, 1]))

    def test_shape_errors_under_either_lowering(self):
        # Shapes are known when XLA compiles: every lowering raises then.
        fn = lambda f, b, c: _ops.custom_ops_roi_box_counts(f, b, c)  # noqa: E731
        for hlo in (False, True):
            with self.subTest(hlo=hlo):
                with xla_test_util.hlo_lowering() if hlo else contextlib.nullcontext():
                    jit = tf.function(fn, jit_compile=True)
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError,
                        re.escape("one count per image of rois (2), got 3"),
                    ):
                        jit(_FEATURES, _BOXES, _counts([1, 1, 1]))
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError,
                        re.escape("rois holds boxes for 2 images but features holds 1"),
                    ):
                        jit(_FEATURES[:1], _BOXES, _counts([1, 1]))

    def test_hlo_lowering_clamps_the_counts(self):
        # The GPU and TFCO_XLA_LOWERING=hlo: a compiled program cannot
        # raise, so counts are clamped to [0, K].
        fn = lambda f, b, c: _ops.custom_ops_roi_box_counts(f, b, c)  # noqa: E731
        with xla_test_util.hlo_lowering():
            jit = tf.function(fn, jit_compile=True)
            hlo = jit.experimental_get_compiler_ir(_FEATURES, _BOXES, _counts([1, 1]))(
                stage="hlo"
            )
            self.assertNotIn("custom_call_target", hlo)
            for counts, clamped in (
                ([-5, 2], [0, 2]),
                ([4, 2**40], [3, 3]),
                ([3, 0], [3, 0]),
            ):
                with self.subTest(counts=counts):
                    self.assertAllEqual(
                        jit(_FEATURES, _BOXES, _counts(counts)), clamped
                    )

    def test_custom_call_where_the_build_has_them(self):
        if not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")
        jit = tf.function(
            lambda f, b, c: _ops.custom_ops_roi_box_counts(f, b, c), jit_compile=True
        )
        hlo = jit.experimental_get_compiler_ir(_FEATURES, _BOXES, _counts([1, 1]))(
            stage="hlo"
        )
        self.assertIn('custom_call_target="tfco_roi_box_counts"', hlo)

    def test_check_runs_where_nothing_reads_it(self):
        # A check whose output nothing reads: the custom call has a side
        # effect, so XLA keeps it.
        if not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")

        @tf.function(jit_compile=True)
        def unread(features, boxes, counts):
            _ops.custom_ops_roi_box_counts(features, boxes, counts)
            return tf.reduce_sum(features)

        with self.assertRaisesRegex(
            (tf.errors.InvalidArgumentError, tf.errors.InternalError),
            re.escape("box_counts must not be negative, got [1, -1]"),
        ):
            unread(_FEATURES, _BOXES, _counts([1, -1]))

    def test_dynamic_sizes_are_checked_when_the_call_runs(self):
        # Under jit, tf.boolean_mask gives a dimension whose size is known
        # only at run time: the custom call compares it then, as the regular
        # kernel does, for each size the op reads.
        if not xla_test_util.custom_calls():
            self.skipTest("this build's lowerings build HLO only")
        op = _ops.custom_ops_roi_box_counts
        masks = {
            "counts": lambda f, b, c, keep: op(f, b, tf.boolean_mask(c, keep)),
            "k": lambda f, b, c, keep: op(f, tf.boolean_mask(b, keep, axis=1), c),
            "images": lambda f, b, c, keep: op(f, tf.boolean_mask(b, keep), c),
            "feature_images": lambda f, b, c, keep: op(tf.boolean_mask(f, keep), b, c),
        }
        cases = [
            ("counts", [1, -1, 2], [True, True, False], _INVALID["negative"][1]),
            ("counts", [1, 2, 4], [True, False, True], _INVALID["above_k"][1]),
            ("counts", [1, 1, 1], [True, True, True], _INVALID["too_many"][1]),
            ("counts", [1, 1], [True, False], _INVALID["too_few"][1]),
            (
                "k",
                [1, 3],
                [True, False, True],
                "box_counts must be at most rois.shape[1] (2), got [1, 3]",
            ),
            (
                "images",
                [1, 1],
                [True, False],
                "rois holds boxes for 1 images but features holds 2",
            ),
            (
                "feature_images",
                [1, 1],
                [False, True],
                "rois holds boxes for 2 images but features holds 1",
            ),
        ]
        for name, counts, keep, message in cases:
            jit = tf.function(masks[name], jit_compile=True)
            with self.subTest(mask=name, counts=counts, keep=keep):
                with self.assertRaisesRegex(
                    xla_test_util.data_error(), re.escape(message)
                ):
                    jit(_FEATURES, _BOXES, _counts(counts), tf.constant(keep))
        # Valid counts pass through, with the dynamic size of theirs.
        for name, counts, keep, expected in (
            ("counts", [3, 5, 0], [True, False, True], [3, 0]),
            ("k", [2, 0], [False, True, True], [2, 0]),
        ):
            with self.subTest(mask=name, counts=counts, keep=keep):
                jit = tf.function(masks[name], jit_compile=True)
                self.assertAllEqual(
                    jit(_FEATURES, _BOXES, _counts(counts), tf.constant(keep)),
                    expected,
                )

    def test_no_gradient(self):
        features = tf.constant(_FEATURES)
        with tf.GradientTape() as tape:
            tape.watch(features)
            counts = _ops.custom_ops_roi_box_counts(features, _BOXES, [1, 2])
            loss = tf.reduce_sum(tf.cast(counts, tf.float32)) * 0 + tf.reduce_sum(
                features
            )
        self.assertAllEqual(tape.gradient(loss, features), tf.ones_like(features))
        with tf.GradientTape() as tape:
            tape.watch(features)
            counts = _ops.custom_ops_roi_box_counts(features, _BOXES, [1, 2])
        self.assertIsNone(tape.gradient(counts, features))


class RoiFunctionCountsTest(tf.test.TestCase, parameterized.TestCase):
    """The RoI functions' `box_counts`, through the op, on every path."""

    def _paths(self, name, jit=True):
        def run(f, b, c):
            return _pool(name, f, b, c)

        paths = [
            ("eager", run),
            ("graph", tf.function(run)),
            ("unknown", tf.function(run, input_signature=_unknown_shapes())),
        ]
        if jit:
            paths.append(("jit", tf.function(run, jit_compile=True)))
            paths.append(
                (
                    "jit_unknown",
                    tf.function(
                        run, jit_compile=True, input_signature=_unknown_shapes()
                    ),
                )
            )
        return paths

    @parameterized.parameters(*_FUNCTIONS, "multi_scale_roi_align")
    def test_invalid_counts_raise(self, name):
        for label, fn in self._paths(name, jit=xla_test_util.custom_calls()):
            for case, (counts, message) in _INVALID.items():
                with self.subTest(path=label, counts=counts):
                    with self.assertRaisesRegex(
                        _error(label, case), re.escape(message)
                    ):
                        fn(_FEATURES, _BOXES, _counts(counts))

    @parameterized.parameters(*_FUNCTIONS, "multi_scale_roi_align")
    def test_valid_counts_give_the_same_results(self, name):
        for counts in _VALID:
            expected = _pool(name, _FEATURES, _BOXES, _counts(counts))
            # Padding is zeros.
            for n, count in enumerate(counts):
                self.assertAllEqual(
                    expected[n, count:], tf.zeros_like(expected[n, count:])
                )
            for label, fn in self._paths(name)[1:]:
                with self.subTest(path=label, counts=counts):
                    self.assertAllClose(
                        fn(_FEATURES, _BOXES, _counts(counts)),
                        expected,
                        rtol=1e-6,
                        atol=1e-6,
                    )

    @parameterized.parameters(*_FUNCTIONS)
    def test_hlo_lowering_pools_the_clamped_counts(self, name):
        jit = tf.function(
            lambda f, b, c: _pool(name, f, b, c),
            jit_compile=True,
            input_signature=_unknown_shapes(),
        )
        with xla_test_util.hlo_lowering():
            for counts, clamped in (([-1, 2], [0, 2]), ([1, 4], [1, 3])):
                with self.subTest(counts=counts):
                    self.assertAllClose(
                        jit(_FEATURES, _BOXES, _counts(counts)),
                        _pool(name, _FEATURES, _BOXES, _counts(clamped)),
                        rtol=1e-5,
                        atol=1e-6,
                    )

    def test_image_count_of_boxes_without_counts(self):
        # [N, K, 4] without counts, ragged and list boxes: the op checks the
        # image count when it is not known until run time.
        features = tf.constant(_FEATURES[:1])
        ragged = tf.RaggedTensor.from_row_lengths(tf.ones([3, 4]), [1, 2])
        message = re.escape("rois holds boxes for 2 images but features holds 1")
        cases = [
            (tf.TensorSpec([None, None, 4], tf.float32), _BOXES),
            (tf.RaggedTensorSpec([None, None, 4], tf.float32, 1), ragged),
        ]
        for spec, boxes in cases:
            fn = tf.function(
                lambda f, b: tfco.roi_align(f, b, 2),
                input_signature=[tf.TensorSpec([None, 6, 6, 4]), spec],
            )
            with self.subTest(boxes=type(boxes).__name__):
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                    fn(features, boxes)
        listed = tf.function(
            lambda f: tfco.roi_align(f, [_BOXES[0], _BOXES[1]], 2),
            input_signature=[tf.TensorSpec([None, 6, 6, 4])],
        )
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            listed(features)
        # Under XLA the shapes are known at compile time, on either lowering.
        jit = tf.function(
            lambda f, b: tfco.roi_align(f, b, 2),
            jit_compile=True,
            input_signature=[
                tf.TensorSpec([None, 6, 6, 4]),
                tf.TensorSpec([None, None, 4]),
            ],
        )
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            jit(features, _BOXES)


def _model():
    keras.utils.set_random_seed(3)
    images = keras.Input((6, 6, 4), name="images")
    boxes = keras.Input((None, 4), name="boxes")
    counts = keras.Input((), dtype="int32", name="box_counts")
    pooled = tfco.layers.RoIAlign(2, sampling_ratio=2)(images, boxes, counts)
    scores = keras.layers.Dense(1)(
        keras.layers.Lambda(lambda p: tf.reduce_mean(p, axis=[-3, -2]))(pooled)
    )
    return keras.Model([images, boxes, counts], scores)


class KerasJitCountsTest(tf.test.TestCase):
    def test_invalid_counts_raise_in_compiled_models(self):
        if not xla_test_util.custom_calls():
            self.skipTest("the HLO lowering clamps the counts")
        targets = np.zeros([2, 3, 1], np.float32)
        for case in ("negative", "above_k"):
            counts, message = _INVALID[case]
            model = _model()
            model.compile(optimizer="sgd", loss="mse", jit_compile=True)
            x = [_FEATURES, _BOXES, np.array(counts, np.int32)]
            with self.subTest(counts=counts, run="predict"):
                with self.assertRaisesRegex(_error("jit", case), re.escape(message)):
                    model.predict(x, verbose=0)
            with self.subTest(counts=counts, run="fit"):
                with self.assertRaisesRegex(_error("jit", case), re.escape(message)):
                    model.fit(x, targets, epochs=1, shuffle=False, verbose=0)

    def test_valid_counts_predict_as_without_jit(self):
        x = [_FEATURES, _BOXES, np.array([2, 3], np.int32)]
        predictions = []
        for jit_compile in (False, True):
            model = _model()
            model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
            predictions.append(model.predict(x, verbose=0))
        self.assertAllClose(predictions[0], predictions[1], rtol=1e-5, atol=1e-6)


# Compiles, in a fresh process with TensorFlow's logging on, every public RoI
# function and layer path that takes per-image boxes, with static and unknown
# shapes, forward and backward, and a Keras fit and predict, the other public
# ops forward and backward, and the run-time checks of second-order gradients
# and tfco.gradients; then a control that does log the note, so that the
# capture is shown to work.
_LOG_SCRIPT = textwrap.dedent(
    """
    import sys
    import keras
    import numpy as np
    import tensorflow as tf
    import tensorflow_customops as tfco

    features = np.ones([2, 6, 6, 4], np.float32)
    boxes = np.tile(np.array([[0, 0, 3, 3]], np.float32), [2, 3, 1])
    counts = np.array([2, 3], np.int64)
    unknown = [
        tf.TensorSpec([None, None, None, 4]),
        tf.TensorSpec([None, None, 4]),
        tf.TensorSpec([None], tf.int64),
    ]

    def pool(name, f, b, c):
        if name == "multi_scale_roi_align":
            return tfco.multi_scale_roi_align(
                [f, f[:, ::2, ::2]], b, 2, spatial_scales=[1.0, 0.5], box_counts=c
            )
        return getattr(tfco, name)(f, b, 2, box_counts=c)

    def step(name):
        def run(f, b, c):
            with tf.GradientTape() as tape:
                tape.watch([f, b])
                loss = tf.reduce_sum(pool(name, f, b, c))
            return loss, tape.gradient(loss, [f, b])
        return run

    names = ["roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align",
             "multi_scale_roi_align"]
    for name in names:
        for signature in (None, unknown):
            tf.function(step(name), jit_compile=True, input_signature=signature)(
                features, boxes, counts)
        tf.function(
            lambda f, b: pool(name, f, b, None), jit_compile=True,
            input_signature=unknown[:2])(features, boxes)
        tf.function(
            lambda f: pool(name, f, [boxes[0], boxes[1, :1]], None),
            jit_compile=True, input_signature=unknown[:1])(features)

    images = keras.Input((6, 6, 4))
    box_input = keras.Input((None, 4))
    count_input = keras.Input((), dtype="int32")
    outputs = [
        layer(images, box_input, count_input)
        for layer in (tfco.layers.RoIPool(2), tfco.layers.RoIAlign(2),
                      tfco.layers.PSRoIPool(2), tfco.layers.PSRoIAlign(2))
    ]
    outputs.append(tfco.layers.MultiScaleRoIAlign(2, spatial_scales=[1.0, 0.5])(
        [images, images[:, ::2, ::2]], box_input, count_input))
    pooled = keras.layers.Concatenate()(
        [keras.layers.Lambda(lambda p: tf.reduce_mean(p, [-3, -2]))(o)
         for o in outputs])
    model = keras.Model([images, box_input, count_input], keras.layers.Dense(1)(pooled))
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    x = [np.ones([4, 6, 6, 4], np.float32), np.tile(boxes[:1], [4, 1, 1]),
         np.array([1, 2, 3, 0], np.int32)]
    model.fit(x, np.zeros([4, 3, 1], np.float32), batch_size=3, verbose=0)
    model.predict(x, batch_size=3, verbose=0)

    # The other public ops, forward and backward, shapes unknown.
    def others(x, offset, w, a, b):
        with tf.GradientTape() as tape:
            tape.watch([x, offset, w, a, b])
            ys = [
                tfco.deform_conv2d(x, offset, w, mask=tf.ones_like(offset[..., :4])),
                tfco.matrix_mul(a, b),
                tfco.zero_out(a),
                *tfco.clip_by_global_norm([a, b], 1.0)[0],
            ]
            loss = tf.add_n([tf.reduce_sum(y) for y in ys])
        return tape.gradient(loss, [x, offset, w, a, b])

    spec = lambda rank: tf.TensorSpec([None] * rank)
    tf.function(others, jit_compile=True, input_signature=[
        spec(4), spec(4), spec(4), spec(2), spec(2)])(
        tf.ones([1, 4, 4, 1]), tf.zeros([1, 3, 3, 8]), tf.ones([2, 2, 1, 1]),
        tf.ones([2, 2]), tf.ones([2, 2]))

    # The run-time checks (CustomOps>CheckCondition) of second-order
    # gradients through the RoI box gradient and DeformableConv2d gradient
    # ops, and of tfco.gradients, shapes unknown; nothing flows in at run
    # time, so they pass.
    def second_order(f, b, x, offset, w, db, dx):
        with tf.GradientTape() as outer:
            outer.watch([b, x])
            with tf.GradientTape() as inner:
                inner.watch([b, x])
                y = tfco.deform_conv2d(x, offset, w)
                loss = tf.reduce_sum(tfco.roi_align(f, b, 2)) + tf.reduce_sum(y * y)
            grads = inner.gradient(loss, [b, x])
        return outer.gradient(grads, [b, x], output_gradients=[db, dx])

    rows = tf.constant([[0.0, 0, 0, 3, 3]])
    image = tf.ones([1, 4, 4, 1])
    tf.function(second_order, jit_compile=True, input_signature=[
        spec(4), spec(2), spec(4), spec(4), spec(4), spec(2), spec(4)])(
        image, rows, image, tf.zeros([1, 3, 3, 8]), tf.ones([2, 2, 1, 1]),
        tf.zeros_like(rows), tf.zeros_like(image))

    def gradients(x, lo, hi, labels, cond):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tfco.gradients.clip_gradient(x, lo, hi)
            loss = tf.reduce_sum(
                tfco.gradients.softmax_cross_entropy(y, labels)
            ) + tf.reduce_sum(
                tfco.gradients.safe_where(cond, tf.sqrt, tf.zeros_like, y))
        return tape.gradient(loss, x)

    tf.function(gradients, jit_compile=True, input_signature=[
        spec(2), tf.TensorSpec(None), tf.TensorSpec(None), spec(2),
        tf.TensorSpec([None, None], tf.bool)])(
        tf.ones([2, 3]), -1.0, 1.0, tf.ones([2, 3]) / 3, tf.ones([2, 3], tf.bool))

    print("--- control", file=sys.stderr, flush=True)
    @tf.function(jit_compile=True)
    def control(v):
        with tf.control_dependencies([tf.debugging.Assert(v[0] > 0, [v])]):
            return v + 1
    control(tf.ones([2]))
    """
)


class NoIgnoredAssertTest(tf.test.TestCase):
    def test_jit_compilations_log_no_ignored_assert(self):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_MAX_VLOG_LEVEL="0")
        result = subprocess.run(
            [sys.executable, "-c", _LOG_SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        ours, control = result.stderr.split("--- control")
        note = "Ignoring Assert operator"
        self.assertIn(note, control)
        self.assertNotIn(
            note, ours, [line for line in ours.splitlines() if note in line]
        )


if __name__ == "__main__":
    tf.test.main()
