"""Per-image boxes for the RoI functions: `[N, K, 4]` (with and without
`box_counts` padding), `tf.RaggedTensor` `[N, None, 4]` and lists of per-image
boxes in every container give, bit for bit, the rows the `[K, 5]` form gives, in
eager, in `tf.function` with unknown shapes, with gradients; lists are told from
rows by their elements; and bad boxes get errors that name the argument."""

import contextlib
import os
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.roi import roi_test_util as util

_COUNTS = [3, 0, 5]


def _case(op):
    """A case, and its boxes per image: `[N, 7, 4]`, and padded to `_COUNTS`
    with NaN, which the ops would reject were it not skipped."""
    case = util.make_case(op, seed=21, batch=len(_COUNTS), spatial_scale=0.5)
    boxes = np.stack([case.rois[case.rois[:, 0] == n][:, 1:] for n in range(3)])
    padded = np.full([len(_COUNTS), max(_COUNTS), 4], np.nan, np.float32)
    for n, count in enumerate(_COUNTS):
        padded[n, :count] = boxes[n, :count]
    return case, boxes, padded


def _rows(padded, counts):
    return np.concatenate(
        [
            np.concatenate([np.full([c, 1], n, np.float32), padded[n, :c]], 1)
            for n, c in enumerate(counts)
        ]
    )


def _box_lists(padded, counts):
    """Image n's first counts[n] boxes in every container a list of per-image
    boxes may come in, by name."""
    arrays = [padded[n, :c] for n, c in enumerate(counts)]
    return {
        "tensors": [tf.constant(a) for a in arrays],
        "arrays": arrays,
        "python lists": [a.tolist() for a in arrays],
        "tuple of float64 arrays": tuple(a.astype(np.float64) for a in arrays),
        "mixed": [
            tf.constant(a) if n % 3 == 0 else a if n % 3 == 1 else a.tolist()
            for n, a in enumerate(arrays)
        ],
    }


def _ragged(padded, counts):
    values = np.concatenate([padded[n, :c] for n, c in enumerate(counts)])
    return tf.RaggedTensor.from_row_lengths(values, counts)


@contextlib.contextmanager
def _captured_stderr():
    """What TensorFlow's C++ logging writes to file descriptor 2 meanwhile,
    appended to the yielded list on exit."""
    log = []
    with tempfile.TemporaryFile() as file:
        saved = os.dup(2)
        os.dup2(file.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            file.seek(0)
            log.append(file.read().decode(errors="replace"))


class RoiBatchedBoxesTest(tf.test.TestCase, parameterized.TestCase):
    @parameterized.product(
        op=util.OP_NAMES,
        data_format=["NHWC", "NCHW", "channels_last", "channels_first"],
        dtype=[tf.float32, tf.bfloat16],
    )
    def test_padded_and_ragged_equal_rows(self, op, data_format, dtype):
        case, _, padded = _case(op)
        layout = "NCHW" if data_format in ("NCHW", "channels_first") else "NHWC"
        features = tf.cast(util.layout(case.features_nhwc, layout), dtype)
        rows = util.call(
            op, features, _rows(padded, _COUNTS), case, data_format=data_format
        ).numpy()
        per_image = np.split(rows, np.cumsum(_COUNTS)[:-1])

        got = getattr(tfco, op)(
            features,
            padded,
            box_counts=_COUNTS,
            **util.op_kwargs(op, case, data_format=data_format),
        ).numpy()
        for n, count in enumerate(_COUNTS):
            self.assertAllEqual(got[n, :count], per_image[n])
            self.assertAllEqual(got[n, count:], np.zeros_like(got[n, count:]))

        ragged = util.call(
            op, features, _ragged(padded, _COUNTS), case, data_format=data_format
        )
        self.assertIsInstance(ragged, tf.RaggedTensor)
        self.assertAllEqual(ragged.row_lengths(), _COUNTS)
        self.assertAllEqual(ragged.flat_values, rows)

    @parameterized.parameters(util.OP_NAMES)
    def test_unpadded_batch_equals_rows(self, op):
        case, boxes, _ = _case(op)
        features = tf.constant(case.features_nhwc)
        rows = util.call(op, features, _rows(boxes, [7, 7, 7]), case)
        got = util.call(op, features, boxes, case)
        self.assertAllEqual(tf.reshape(got, rows.shape), rows)

    @parameterized.parameters(util.OP_NAMES)
    def test_every_box_list_is_per_image(self, op):
        case, boxes, padded = _case(op)
        features = tf.constant(case.features_nhwc)
        # Unequal lengths, image 1 without boxes (`[]` as Python lists), and
        # equal lengths: always a RaggedTensor, whose rows are the [K, 5] form's.
        for source, counts in ((padded, _COUNTS), (boxes, [7, 7, 7])):
            rows = util.call(op, features, _rows(source, counts), case)
            for container, rois in _box_lists(source, counts).items():
                with self.subTest(container=container, counts=counts):
                    got = util.call(op, features, rois, case)
                    self.assertIsInstance(got, tf.RaggedTensor)
                    self.assertEqual(got.shape[:2].as_list(), [3, None])
                    self.assertAllEqual(got.row_lengths(), counts)
                    self.assertAllEqual(got.flat_values, rows)

    @parameterized.parameters(util.OP_NAMES)
    def test_rows_in_every_container(self, op):
        case, _, padded = _case(op)
        features = tf.constant(case.features_nhwc)
        rows = _rows(padded, _COUNTS)
        expected = util.call(op, features, rows, case)
        for container, rois in (
            ("python list", rows.tolist()),
            ("tuple of arrays", tuple(rows)),
            ("list of tensors", [tf.constant(r) for r in rows]),
            ("tensor", tf.constant(rows)),
        ):
            with self.subTest(container=container):
                got = util.call(op, features, rois, case)
                self.assertNotIsInstance(got, tf.RaggedTensor)
                self.assertAllEqual(got, expected)

    def test_how_a_list_is_read(self):
        features = tf.reshape(tf.range(16.0), [1, 4, 4, 1])
        # A list of rows of five numbers: [K, 5] rows.
        rows = tfco.roi_pool(features, [[0, 0, 0, 3, 3]], 2)
        self.assertEqual(rows.shape, [1, 2, 2, 1])
        # A list of an image's boxes: per image.
        per_image = tfco.roi_pool(features, [[[0, 0, 3, 3]]], 2)
        self.assertIsInstance(per_image, tf.RaggedTensor)
        self.assertAllEqual(per_image.row_lengths(), [1])
        self.assertAllEqual(per_image.flat_values, rows)
        # An image without boxes is [] (a row is never empty).
        features = tf.concat([features, features], 0)
        empty = tfco.roi_pool(features, [[], []], 2)
        self.assertAllEqual(empty.row_lengths(), [0, 0])
        self.assertEqual(empty.flat_values.shape, [0, 2, 2, 1])

    def test_box_list_errors(self):
        features = tf.ones([2, 5, 5, 3])
        cases = [
            ([], ValueError, r"rois is an empty list: give np.zeros\(\[0, 5\]\)"),
            (
                [[0, 1, 1, 3, 3], [[1, 1, 3, 3]]],
                ValueError,
                r"rois mixes \[5\] rows .* rois\[0\] is a row and rois\[1\] an "
                r"image's boxes",
            ),
            (
                [np.ones([2, 4]), np.ones(5)],
                ValueError,
                r"rois\[1\] is a row and rois\[0\] an image's boxes",
            ),
            (
                [[[0, 0, 3, 3], [1, 1]], []],
                ValueError,
                r"rois\[0\] must have shape \[L, 4\]: Can't convert non-rectangular",
            ),
            ([[], [[1, 1, 3]]], ValueError, r"rois\[1\] must have shape \[L, 4\]"),
            ([[], [["a", "b", "c", "d"]]], TypeError, r"rois\[1\] must be numbers"),
            (
                [[0, 1, 1, 3, 3], [0, 1, 1]],
                ValueError,
                r"rois must be \[K, 5\] rows .*: Can't convert non-rectangular",
            ),
            (
                [[[0, 0, 3, 3]], [], []],
                ValueError,
                "rois holds boxes for 3 images but features holds 2",
            ),
            ([[[0, 0, 3, 3]]], ValueError, "boxes for 1 images but features holds 2"),
        ]
        for rois, error, message in cases:
            with self.subTest(rois=rois):
                with self.assertRaisesRegex(error, message):
                    tfco.roi_align(features, rois, 2)
        with self.assertRaisesRegex(
            ValueError, "box_counts must be None for a list of per-image boxes"
        ):
            tfco.roi_align(features, [[[0, 0, 3, 3]], []], 2, box_counts=[1, 0])

    @parameterized.parameters(util.OP_NAMES)
    def test_gradients_equal_rows(self, op):
        case, _, padded = _case(op)
        features = tf.constant(case.features_nhwc)
        results = []
        for rois, counts in (
            (_rows(padded, _COUNTS), None),
            (padded, _COUNTS),
            (_ragged(padded, _COUNTS), None),
            (_box_lists(padded, _COUNTS)["python lists"], None),
        ):
            with tf.GradientTape() as tape:
                tape.watch(features)
                out = getattr(tfco, op)(
                    features, rois, box_counts=counts, **util.op_kwargs(op, case)
                )
                values = out.flat_values if isinstance(out, tf.RaggedTensor) else out
                loss = tf.reduce_sum(tf.sin(values))
            results.append(tape.gradient(loss, features))
        self.assertGreater(np.count_nonzero(results[0]), 10)
        for result in results[1:]:
            self.assertAllEqual(result, results[0])

    @parameterized.parameters(util.OP_NAMES)
    def test_tf_function_with_unknown_shapes(self, op):
        case, _, padded = _case(op)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, None, None], tf.float64),
                tf.TensorSpec([None, None, 4], tf.float32),
                tf.TensorSpec([None], tf.int32),
            ]
        )
        def padded_fn(features, boxes, counts):
            return getattr(tfco, op)(
                features, boxes, box_counts=counts, **util.op_kwargs(op, case)
            )

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, None, None], tf.float64),
                tf.RaggedTensorSpec([None, None, 4], tf.float32, ragged_rank=1),
            ]
        )
        def ragged_fn(features, boxes):
            return util.call(op, features, boxes, case)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, None, None], tf.float64),
                [tf.TensorSpec([None, 4], tf.float32)] * len(_COUNTS),
            ]
        )
        def list_fn(features, boxes):
            return util.call(op, features, boxes, case)

        features = case.features_nhwc
        expected = getattr(tfco, op)(
            features, padded, box_counts=_COUNTS, **util.op_kwargs(op, case)
        )
        self.assertAllEqual(padded_fn(features, padded, _COUNTS), expected)
        ragged = ragged_fn(features, _ragged(padded, _COUNTS))
        self.assertAllEqual(ragged.to_tensor(shape=expected.shape), expected)
        from_list = list_fn(features, _box_lists(padded, _COUNTS)["arrays"])
        self.assertAllEqual(from_list, ragged)

    def test_no_boxes(self):
        features = tf.ones([2, 5, 5, 3])
        out = tfco.roi_align(features, tf.zeros([2, 0, 4]), 2)
        self.assertEqual(out.shape, [2, 0, 2, 2, 3])
        out = tfco.roi_align(features, tf.ones([2, 4, 4]), 2, box_counts=[0, 0])
        self.assertAllEqual(out, tf.zeros([2, 4, 2, 2, 3]))
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0, 4]), [0, 0])
        self.assertEqual(tfco.roi_align(features, empty, 2).flat_values.shape[0], 0)

    def test_box_count_errors(self):
        features = tf.ones([2, 5, 5, 3])
        boxes = tf.ones([2, 3, 4])
        cases = [
            ([1, 4], tf.errors.InvalidArgumentError, "box_counts must be at most"),
            ([2**40, 1], tf.errors.InvalidArgumentError, "must be at most"),
            ([1, -1], tf.errors.InvalidArgumentError, "must not be negative"),
            ([1, 1, 1], tf.errors.InvalidArgumentError, "one count per image"),
            ([1.0, 2.0], TypeError, "box_counts must be integers"),
            ([[1, 2]], ValueError, r"box_counts must have shape \[N\]"),
        ]
        for counts, error, message in cases:
            with self.subTest(counts=counts):
                with self.assertRaisesRegex(error, message):
                    tfco.roi_align(features, boxes, 2, box_counts=counts)
        with self.assertRaisesRegex(ValueError, r"box_counts needs \[N, K, 4\]"):
            tfco.roi_align(features, [[0, 1, 1, 2, 2]], 2, box_counts=[1])
        ragged = tf.RaggedTensor.from_row_lengths(tf.ones([3, 4]), [1, 2])
        with self.assertRaisesRegex(ValueError, "box_counts must be None for Ragged"):
            tfco.roi_align(features, ragged, 2, box_counts=[1, 2])

    def test_box_count_errors_in_graph(self):
        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, 4], tf.float32),
                tf.TensorSpec([None], tf.int64),
            ]
        )
        def fn(boxes, counts):
            return tfco.roi_align(tf.ones([2, 5, 5, 3]), boxes, 2, box_counts=counts)

        boxes = tf.ones([2, 3, 4])
        self.assertEqual(fn(boxes, [3, 0]).shape, [2, 3, 2, 2, 3])
        cases = [
            ([1, 4], r"box_counts must be at most rois.shape\[1\] \(3\), got \[1, 4\]"),
            # Compared in int64.
            ([2**40, 1], r"at most .* got \[1099511627776, 1\]"),
            ([1, -1], r"box_counts must not be negative, got \[1, -1\]"),
            ([1, 1, 1], r"one count per image of rois \(2\), got 3"),
        ]
        for counts, message in cases:
            with self.subTest(counts=counts):
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                    fn(boxes, counts)

    def test_traces_log_no_loop_optimizer_warning(self):
        # Grappler's loop optimizer warns at every trace that it cannot prune a
        # cond with a constant predicate when a Merge has a control input;
        # TensorFlow wraps an Assert in such a cond unless its data are string
        # or int32. `control` proves that the warning would be seen here.
        def log_of_first_call(fn, *args):
            with _captured_stderr() as log:
                fn(*args)
            return log[0]

        @tf.function
        def control(counts):
            check = tf.debugging.assert_equal(tf.size(counts, tf.int64), np.int64(2))
            with tf.control_dependencies([check]):
                return tf.identity(counts)

        warning = "Skipping loop optimization"
        counts = tf.constant([2, 1], tf.int64)
        self.assertIn(warning, log_of_first_call(control, counts))

        features = tf.ones([2, 5, 5, 3])
        fn = tf.function(lambda b, c: tfco.roi_align(features, b, 2, box_counts=c))
        self.assertNotIn(warning, log_of_first_call(fn, tf.ones([2, 3, 4]), counts))

    def test_image_count_must_match(self):
        features = tf.ones([2, 5, 5, 3])
        with self.assertRaisesRegex(
            ValueError, "rois holds boxes for 3 images but features holds 2"
        ):
            tfco.roi_align(features, tf.ones([3, 1, 4]), 2)
        ragged = tf.RaggedTensor.from_row_lengths(tf.ones([3, 4]), [1, 1, 1])
        with self.assertRaisesRegex(ValueError, "boxes for 3 images"):
            tfco.roi_align(features, ragged, 2)

        @tf.function(input_signature=[tf.TensorSpec([None, None, 4], tf.float32)])
        def fn(boxes):
            return tfco.roi_align(features, boxes, 2)

        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            "rois holds boxes for 1 images but features holds 2",
        ):
            fn(tf.ones([1, 2, 4]))

    @parameterized.parameters(util.OP_NAMES)
    def test_argument_errors_name_the_argument(self, op):
        features = tf.ones([1, 4, 4, 8])
        fn = getattr(tfco, op)
        cases = [
            (
                dict(features=tf.ones([1, 4, 4, 8], tf.int32)),
                TypeError,
                "features must be float16",
            ),
            (
                dict(features=tf.ones([4, 4, 8])),
                ValueError,
                "features must have rank 4",
            ),
            (dict(output_size=2.0), TypeError, "output_size must be an int or a pair"),
            (dict(output_size=tf.constant(2)), TypeError, "cannot be a tensor"),
            (dict(output_size=(2, 2, 2)), TypeError, "output_size must be an int"),
            (dict(output_size=True), TypeError, "output_size must be an int"),
            (dict(output_size=(0, 2)), ValueError, "output_size must be positive"),
            (dict(data_format="NWHC"), ValueError, "data_format must be 'NHWC' or"),
            (
                dict(rois=tf.ones([2, 4])),
                ValueError,
                r"rois must have shape \[K, 5\] or \[N, K, 4\]",
            ),
            (dict(rois=tf.ones([1, 2, 5])), ValueError, r"rois must have shape"),
            (dict(rois=["a"]), TypeError, "rois must be numbers"),
            (
                dict(rois=[np.ones([2, 5])]),
                ValueError,
                r"rois\[0\] must have shape \[L, 4\]",
            ),
        ]
        for override, error, message in cases:
            kwargs = dict(features=features, rois=[[0, 0, 0, 2, 2]], output_size=2)
            kwargs.update(override)
            with self.subTest(override=list(override)):
                with self.assertRaisesRegex(error, message):
                    fn(**kwargs)


if __name__ == "__main__":
    tf.test.main()
