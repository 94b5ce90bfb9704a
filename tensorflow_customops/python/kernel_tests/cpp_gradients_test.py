"""C++ gradients in TF2 through `tfco.cpp_gradient`, for every op of the
library that has one (read from its OpList): bit for bit the Python gradient
in eager mode and in `tf.function`, for every dtype and attr case; both equal
the numeric Jacobian in float64; second-order gradients through both; and an
op whose Python gradient is removed gets the bridged one at registration."""

import contextlib

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.python.framework import ops as framework_ops

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import cpp_gradients, load_library

_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
_ROIS = np.array(
    [[0, 1.0, 1.5, 9.0, 7.0], [1, 0.0, 2.0, 5.5, 11.0], [0, 3.0, 0.0, 11.0, 11.0]],
    np.float32,
)


def _normal(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _flat_clip(clipped, global_norm):
    return [*clipped, global_norm]


def _roi_cases(op, with_sampling):
    fn = getattr(tfco, op)
    cases = []
    for data_format in ("NHWC", "NCHW"):
        shape = (2, 4, 5, 4) if data_format == "NHWC" else (2, 4, 4, 5)
        variants = [{}]
        if with_sampling:
            variants = [
                {"sampling_ratio": -1, "aligned": True},
                {"sampling_ratio": 2, "aligned": False},
            ]
        for attrs in variants:
            cases.append(
                (
                    f"{data_format}_{attrs}",
                    lambda s=shape: [_normal(1, *s), _ROIS],
                    lambda x, rois, a=attrs, d=data_format: fn(
                        x, rois, 2, spatial_scale=0.5, data_format=d, **a
                    ),
                    (0,),
                )
            )
    return cases


# Op type -> [(case name, () -> NumPy inputs, forward(*tensors), indices of
# the differentiable inputs)]. The forward casts floating inputs to the dtype
# under test, except the RoI boxes, which are always float32.
_CASES = {
    "CustomOps>ZeroOut": [
        (
            f"keep{keep}",
            lambda: [_normal(2, 6)],
            lambda x, k=keep: tfco.zero_out(x, keep=k),
            (0,),
        )
        for keep in (1, 3, 10)
    ],
    "CustomOps>MatrixMul": [
        (
            f"ta{ta}_tb{tb}",
            lambda ta=ta, tb=tb: [
                _normal(3, *((4, 3) if ta else (3, 4))),
                _normal(4, *((2, 4) if tb else (4, 2))),
            ],
            lambda a, b, ta=ta, tb=tb: tfco.matrix_mul(
                a, b, transpose_a=ta, transpose_b=tb
            ),
            (0, 1),
        )
        for ta in (False, True)
        for tb in (False, True)
    ],
    "CustomOps>ClipByGlobalNorm": [
        (
            f"n{n}_clip{clip}",
            lambda n=n, clip=clip: (
                [_normal(5 + i, 3, 2) for i in range(n)] + [np.array(clip)]
            ),
            lambda *xs: _flat_clip(*tfco.clip_by_global_norm(list(xs[:-1]), xs[-1])),
            None,  # every input
        )
        for n in (1, 3)
        for clip in (0.5, 100.0)
    ],
    "CustomOps>CheckNumericsN": [
        (
            "one_dtype",
            lambda: [_normal(6, 3), _normal(7, 2, 2)],
            lambda a, b: tfco.check_numerics_n([a, b], "message"),
            None,
        ),
        (
            "mixed_dtypes",
            lambda: [_normal(6, 3), _normal(7, 2, 2)],
            lambda a, b: tfco.check_numerics_n([a, tf.cast(b, tf.float64)], "m"),
            None,
        ),
    ],
    "CustomOps>RoiPool": _roi_cases("roi_pool", False),
    "CustomOps>RoiAlign": _roi_cases("roi_align", True),
    "CustomOps>PsRoiPool": _roi_cases("ps_roi_pool", False),
    "CustomOps>PsRoiAlign": _roi_cases("ps_roi_align", True),
}


def _ops_with_cpp_gradients():
    return sorted(
        op.name
        for op in load_library.op_list().op
        if cpp_gradients.has_cpp_gradient(op.name)
    )


def _all_cases():
    return [
        dict(testcase_name=f"{op.split('>')[1]}_{name}", op=op, case=case)
        for op, cases in sorted(_CASES.items())
        for case in cases
        for name in [case[0]]
    ]


@contextlib.contextmanager
def _bridged(op_type):
    """`op_type`'s Python gradient replaced by the bridged C++ gradient, the
    way `register_missing_gradients` registers it for an op without one."""
    registry = framework_ops._gradient_registry._registry  # pylint: disable=protected-access
    saved = registry.pop(op_type)
    try:
        yield cpp_gradients.register_missing_gradients()
    finally:
        registry[op_type] = saved


def _tensors(case, dtype):
    _, make_inputs, _, differentiable = case
    arrays = make_inputs()
    indices = range(len(arrays)) if differentiable is None else differentiable
    tensors = [
        tf.constant(a, dtype if i in indices else tf.float32)
        for i, a in enumerate(arrays)
    ]
    return tensors, list(indices)


def _upstream(outputs):
    return [
        tf.constant(_normal(11 + k, *y.shape), tf.float64)
        for k, y in enumerate(outputs)
    ]


def _gradients(case, tensors, indices, upstream=None):
    """d(sum(forward * upstream)) / d(differentiable inputs); a fixed random
    upstream by default."""
    forward = case[2]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        outputs = tf.nest.flatten(forward(*tensors))
        upstream = _upstream(outputs) if upstream is None else upstream
        loss = tf.add_n(
            [
                tf.reduce_sum(tf.cast(y, tf.float64) * u)
                for y, u in zip(outputs, upstream)
            ]
        )
    return tape.gradient(loss, [tensors[i] for i in indices])


class CppGradientsTest(tf.test.TestCase, parameterized.TestCase):
    def test_every_op_with_a_cpp_gradient_has_cases(self):
        ops = _ops_with_cpp_gradients()
        self.assertNotEmpty(ops)
        missing = sorted(set(ops) - set(_CASES))
        self.assertEmpty(
            missing,
            f"add cases for {missing} to _CASES in cpp_gradients_test.py: "
            "inputs, a forward function and its differentiable inputs",
        )
        self.assertEmpty(sorted(set(_CASES) - set(ops)))

    @parameterized.named_parameters(_all_cases())
    def test_bridged_equals_python_bit_for_bit(self, op, case):
        for dtype in _DTYPES:
            tensors, indices = _tensors(case, dtype)
            python = _gradients(case, tensors, indices)
            python_graph = tf.function(
                lambda *t, i=indices: _gradients(case, list(t), i)
            )(*tensors)
            with _bridged(op) as registered:
                self.assertEqual(registered, [op])
                bridged = _gradients(case, tensors, indices)
                bridged_graph = tf.function(
                    lambda *t, i=indices: _gradients(case, list(t), i)
                )(*tensors)
            for got, want in zip(bridged + bridged_graph, python + python_graph):
                self.assertEqual(got.dtype, dtype)
                self.assertAllEqual(got, want)
            self.assertTrue(any(np.any(g != 0) for g in python))

    @parameterized.named_parameters(_all_cases())
    def test_numeric_jacobians_first_and_second_order(self, op, case):
        tensors, indices = _tensors(case, tf.float64)
        count = len(indices)

        def with_points(points):
            inputs = list(tensors)
            for i, t in zip(indices, points):
                inputs[i] = t
            return inputs

        def forward(*points):
            return tf.nest.flatten(case[2](*with_points(points)))

        def first_order(*points_and_upstream):
            points, upstream = points_and_upstream[:count], points_and_upstream[count:]
            return _gradients(case, with_points(points), indices, list(upstream))

        points = [tensors[i] for i in indices]
        upstream = _upstream(forward(*points))
        for bridged in (False, True):
            with _bridged(op) if bridged else contextlib.nullcontext():
                for k in range(len(upstream)):
                    with self.subTest(bridged=bridged, order=1, output=k):
                        theoretical, numerical = tf.test.compute_gradient(
                            lambda *p, k=k: forward(*p)[k], points, delta=1e-6
                        )
                        self.assertAllClose(
                            theoretical, numerical, rtol=1e-6, atol=1e-6
                        )
                # The first-order gradients as functions of the inputs and
                # of the upstream gradient.
                for k in range(count):
                    with self.subTest(bridged=bridged, order=2, gradient=k):
                        theoretical, numerical = tf.test.compute_gradient(
                            lambda *p, k=k: first_order(*p)[k],
                            points + upstream,
                            delta=1e-6,
                        )
                        self.assertAllClose(
                            theoretical, numerical, rtol=1e-5, atol=1e-5
                        )

    def test_ops_without_cpp_gradients(self):
        with tf.Graph().as_default():
            grad = load_library.load_op_library().custom_ops_roi_align_grad(
                tf.ones([1, 2, 2, 1]), _ROIS[:1], [1, 4, 4, 1], 2, 2
            )
            with self.assertRaisesRegex(
                LookupError, "No C\\+\\+ gradient for CustomOps>RoiAlignGrad"
            ):
                cpp_gradients.cpp_gradient(grad.op, tf.ones([1, 4, 4, 1]))
        self.assertFalse(cpp_gradients.has_cpp_gradient("CustomOps>RoiAlignGrad"))
        self.assertFalse(cpp_gradients.has_cpp_gradient("NoSuchOp"))

    def test_ops_with_python_gradients_are_left_alone(self):
        self.assertEqual(cpp_gradients.register_missing_gradients(), [])


if __name__ == "__main__":
    tf.test.main()
