"""Registry entries of DeformableConv2d and its gradient op."""

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import deform_conv2d_ops, load_library
from tensorflow_customops.python.registry import arrays, values
from tensorflow_customops.python.registry.entry import Case, Entry, Override
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    MEGA,
    traced_shapes,
)

_ops = load_library.load_op_library()

_XLA_REASON = "XLA's dot, reductions and scatter-adds sum in another order"
_XLA_TOLERANCE = {
    "float16": (2e-3, 2e-3, _XLA_REASON + ", rounded once to half"),
    "bfloat16": (1.6e-2, 1.6e-2, _XLA_REASON + ", rounded once to bfloat16"),
    "float32": (1e-5, 1e-5, _XLA_REASON),
    "float64": (1e-12, 1e-12, _XLA_REASON),
}


def _inputs(seed, n, c, h, w, o, kernel, groups, offset_groups, dtype, mask=True):
    """input, offset, filter (and mask) for a VALID, stride-1 call, as NumPy;
    offsets of a few pixels, so that samples land between pixels and off the
    map."""
    rng = values.rng(seed)
    kh, kw = kernel
    ho, wo = h - kh + 1, w - kw + 1
    taps = offset_groups * kh * kw
    arrays_ = [
        values.rounded_normal(rng, (n, h, w, c), dtype),
        values.rounded_normal(rng, (n, ho, wo, 2 * taps), dtype) * 1.5,
        values.rounded_normal(rng, (kh, kw, c // groups, o), dtype),
    ]
    if mask:
        arrays_.append(rng.uniform(size=(n, ho, wo, taps)).astype(arrays_[0].dtype))
    return arrays_


def _forward(dtype=None):
    cast = values.cast_to(dtype) if dtype is not None else (lambda x: x)

    def forward(x, offset, filt, mask=None):
        return tfco.deform_conv2d(
            cast(x),
            cast(offset),
            cast(filt),
            mask=None if mask is None else cast(mask),
        )

    return forward


def _property_case(dtype):
    # 2 x 14 x 14 output pixels of 32 channels x 9 taps: every pass splits
    # over 4 threads; the two groups and offset groups run the segment and
    # group paths.
    return Case(
        f"deform_conv2d_{dtype.name}",
        lambda seed: _inputs(seed, 2, 32, 16, 16, 16, (3, 3), 2, 2, dtype),
        _forward(dtype),
        (0, 1, 2, 3),
    )


def _gradient_cases():
    return [
        Case(
            name,
            lambda seed, kw=kw: _inputs(seed + 5, **kw, dtype=tf.float64),
            _forward(),
            None,
        )
        for name, kw in (
            (
                "mask",
                dict(n=1, c=2, h=4, w=4, o=2, kernel=(2, 3), groups=1, offset_groups=2),
            ),
            (
                "groups_nomask",
                dict(
                    n=1,
                    c=4,
                    h=3,
                    w=4,
                    o=2,
                    kernel=(2, 2),
                    groups=2,
                    offset_groups=1,
                    mask=False,
                ),
            ),
        )
    ]


def _large_shapes(test):
    filt = tf.zeros([3, 3, 4, 8])
    offset = tf.TensorSpec([None, 4, 4, 18], tf.float32)

    def conv(x, o):
        return tfco.deform_conv2d(x, o, filt, padding="SAME")

    test.assertEqual(
        traced_shapes(conv, tf.TensorSpec([BIG, None, None, 4], tf.float32), offset),
        [[BIG, 4, 4, 8]],
    )
    with test.assertRaisesRegex(
        ValueError, r"output \[1099511627776,1048576,1048576,8\]: its number"
    ):
        traced_shapes(
            conv,
            tf.TensorSpec([BIG, None, None, 4], tf.float32),
            tf.TensorSpec([None, MEGA, MEGA, 18], tf.float32),
        )
    # Huge empty tensors pass through the kernels.
    x = tf.zeros([0, HUGE, 1, 1])
    y = tfco.deform_conv2d(x, tf.zeros([0, HUGE, 1, 2]), tf.zeros([1, 1, 1, 1]))
    test.assertEqual(y.shape, [0, HUGE, 1, 1])
    # A column of C * kh * kw beyond 2^50 elements is refused, naming it.
    with test.assertRaisesRegex(
        tf.errors.InvalidArgumentError, r"input channels \* filter taps .* exceeds"
    ):
        _ops.custom_ops_deformable_conv2d(
            tf.zeros([0, 1, 1, 2**45]),
            tf.zeros([64, 64, 2**45, 0]),
            tf.zeros([0, 1, 1, 2 * 64 * 64]),
            tf.zeros([0, 1, 1, 64 * 64]),
            padding="SAME",
        )


def _grad_large_shapes(test):
    grad = _ops.custom_ops_deformable_conv2d_grad
    x = tf.zeros([0, HUGE, 1, 1])
    outputs = grad(
        x,
        tf.zeros([1, 1, 1, 1]),
        tf.zeros([0, HUGE, 1, 2]),
        tf.zeros([0, HUGE, 1, 1]),
        tf.zeros([0, HUGE, 1, 1]),
    )
    test.assertEqual(
        [t.shape for t in outputs[:3]], [x.shape, [1, 1, 1, 1], [0, HUGE, 1, 2]]
    )
    test.assertAllEqual(outputs[1], tf.zeros([1, 1, 1, 1]))

    def specs(*shapes):
        return [tf.TensorSpec(shape, tf.float32) for shape in shapes]

    unknown = [None, None, None]
    test.assertEqual(
        traced_shapes(
            lambda x, o, m, dy: grad(x, tf.zeros([3, 3, 4, 8]), o, m, dy),
            *specs([BIG, None, None, 4], unknown + [18], unknown + [9], unknown + [8]),
        ),
        [[BIG, None, None, 4], [3, 3, 4, 8], unknown + [18], unknown + [9]],
    )


def _nchw(attrs):
    return attrs.get("data_format") == "NCHW"


def _layout(attrs, n, h, w, c):
    return (n, c, h, w) if _nchw(attrs) else (n, h, w, c)


def _pair(attrs, name):
    """The (height, width) entries of a 4-entry attr, or None."""
    value = attrs.get(name, [1, 1, 1, 1])
    if len(value) != 4:
        return None
    return (value[2], value[3]) if _nchw(attrs) else (value[1], value[2])


def _output_size(attrs, h, w, kh, kw):
    """The op's output height and width for valid attrs, as its shape
    function computes them; (h, w) where the attrs are malformed or the
    output would be large (the op then rejects the shapes or the attrs)."""
    strides, dilations = _pair(attrs, "strides"), _pair(attrs, "dilations")
    if strides is None or dilations is None or min(strides + dilations) < 1:
        return h, w
    padding = attrs.get("padding", "VALID")
    pads = attrs.get("explicit_paddings", [])
    sizes = []
    for axis, (size, k, s, d) in enumerate(zip((h, w), (kh, kw), strides, dilations)):
        if padding == "SAME":
            sizes.append(-(-size // s))
            continue
        before = after = 0
        if padding == "EXPLICIT" and len(pads) == 8:
            dim = axis + (2 if _nchw(attrs) else 1)
            before, after = pads[2 * dim], pads[2 * dim + 1]
        sizes.append(max((size + before + after - (k - 1) * d - 1 + s) // s, 0))
    return tuple(sizes) if sizes[0] * sizes[1] <= 64 else (h, w)


@st.composite
def _fuzz(draw, op_def, attrs, rng):
    """Inputs of consistent shapes for the attrs drawn, with offsets far off
    the map, NaN and infinite now and then."""
    offset_groups = arrays.small_dim(attrs.get("offset_groups"), 1)
    groups = draw(st.sampled_from([1, 2]))
    c = groups * offset_groups * draw(st.integers(1, 2))
    n, h, w = (
        draw(st.integers(0, 2)),
        draw(st.integers(0, 6)),
        draw(st.integers(0, 6)),
    )
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    o = groups * draw(st.integers(0, 2))
    ho, wo = _output_size(attrs, h, w, kh, kw)
    dtype = arrays.float_type(attrs)
    taps = offset_groups * kh * kw
    offset = arrays.make_array(
        rng, dtype, _layout(attrs, n, ho, wo, 2 * taps), -2.0 * h - 3, 2.0 * h + 3
    )
    tags = ()
    if (
        arrays.is_float(dtype)
        and not isinstance(offset, arrays.ZeroSized)
        and draw(st.integers(0, 3)) == 0
    ):
        offset.flat[draw(st.integers(0, offset.size - 1))] = draw(
            st.sampled_from([np.nan, np.inf, -np.inf, 1e30])
        )
        tags += ("non_finite_offset",)
    mask_shape = (
        _layout(attrs, n, ho, wo, taps) if attrs.get("use_mask", True) else (0,)
    )
    inputs = {
        "input": arrays.make_array(rng, dtype, _layout(attrs, n, h, w, c)),
        "filter": arrays.make_array(rng, dtype, (kh, kw, c // groups, o)),
        "offset": offset,
        "mask": arrays.make_array(rng, dtype, mask_shape, 0.0, 1.0),
    }
    if any(arg.name == "grad_output" for arg in op_def.input_arg):
        inputs["grad_output"] = arrays.make_array(
            rng, dtype, _layout(attrs, n, ho, wo, o)
        )
    return inputs, tags


def _golden_inputs(with_grad_output):
    shapes = [(1, 3, 3, 2), (2, 2, 2, 2), (1, 2, 2, 8), (1, 2, 2, 4)]
    if with_grad_output:
        shapes.append((1, 2, 2, 2))
    return values.shaped_small_values(*shapes)


_ENTRY_COMMON = dict(
    fuzz_hint=_fuzz,
    xla_tolerance=_XLA_TOLERANCE,
    xla_custom_call=True,
    second_order_error=deform_conv2d_ops.SECOND_ORDER_ERROR,
)

ENTRIES = [
    Entry(
        "CustomOps>DeformableConv2d",
        large_shapes=_large_shapes,
        property_cases=lambda: [
            _property_case(tf.float32),
            _property_case(tf.bfloat16),
            _property_case(tf.float64),
        ],
        gradient_cases=_gradient_cases,
        xla_shape_errors=lambda: [
            (
                Case(
                    "offset_channels",
                    lambda seed: [np.zeros([1, 4, 4, 2]), np.zeros([1, 2, 2, 16])],
                    lambda x, o: _ops.custom_ops_deformable_conv2d(
                        x, tf.zeros([3, 3, 2, 2]), o, tf.zeros([0]), use_mask=False
                    ),
                ),
                r"offset \[1, 2, 2, 16\] must have channel count 18",
            )
        ],
        golden=Override(
            inputs=_golden_inputs(False),
            output_grads=values.shaped_small_values((1, 2, 2, 2)),
        ),
        **_ENTRY_COMMON,
    ),
    Entry(
        "CustomOps>DeformableConv2dGrad",
        large_shapes=_grad_large_shapes,
        golden=Override(inputs=_golden_inputs(True)),
        **_ENTRY_COMMON,
    ),
]
