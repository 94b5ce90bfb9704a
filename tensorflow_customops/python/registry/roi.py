"""Registry entries of the RoI ops (RoiPool, RoiAlign, PsRoiPool, PsRoiAlign)
and their gradient ops."""

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st
from tensorflow.core.framework import attr_value_pb2, types_pb2

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import arrays, boxes, values
from tensorflow_customops.python.registry.entry import Case, Entry, Override
from tensorflow_customops.python.registry.large_shapes import (
    BIG,
    HUGE,
    INT32_MAX,
    MEGA,
    traced_shapes,
)

_ops = load_library.load_op_library()

# Op function name -> registered name.
OPS = {
    "roi_pool": "RoiPool",
    "roi_align": "RoiAlign",
    "ps_roi_pool": "PsRoiPool",
    "ps_roi_align": "PsRoiAlign",
}

# --- Property cases: forward parallel over output bins (1200 rois x 16
# bins), backward over (image, channel block) pairs.

_OUTPUT_SIZE = 4
_PROPERTY_ATTRS = {
    "roi_pool": {},
    "roi_align": {"sampling_ratio": 2, "aligned": True},
    "ps_roi_pool": {},
    "ps_roi_align": {"sampling_ratio": -1, "aligned": False},
}


def _property_inputs(seed, dtype, data_format="NHWC", boxes_dtype=tf.float32):
    rng = values.rng(seed)
    features = values.rounded_normal(rng, (2, 40, 40, 64), dtype)
    if data_format == "NCHW":
        features = np.ascontiguousarray(np.transpose(features, [0, 3, 1, 2]))
    rois = boxes.uniform(rng, 300, 2, 40, 40, boxes_dtype.as_numpy_dtype)
    return [features, rois]


def _property_case(op, dtype=tf.float32, data_format="NHWC", boxes_dtype=tf.float32):
    cast = values.cast_to(dtype)
    attrs = dict(_PROPERTY_ATTRS[op], data_format=data_format)
    suffix = "" if boxes_dtype == tf.float32 else f"_{boxes_dtype.name}_boxes"
    return Case(
        f"{op}_{dtype.name}_{data_format}{suffix}",
        lambda seed: _property_inputs(seed, dtype, data_format, boxes_dtype),
        lambda features, rois: getattr(tfco, op)(
            cast(features), rois, _OUTPUT_SIZE, **attrs
        ),
        (0,),
    )


def _gradient_op_case(op, suffix, run):
    """A gradient op called directly, with a random incoming gradient:
    run(features, rois, grads, attrs) calls it."""
    attrs = dict(
        _PROPERTY_ATTRS[op], pooled_height=_OUTPUT_SIZE, pooled_width=_OUTPUT_SIZE
    )
    channels = 64 // _OUTPUT_SIZE**2 if op.startswith("ps_") else 64
    pooled_shape = (300, _OUTPUT_SIZE, _OUTPUT_SIZE, channels)

    def make(seed):
        features, rois = _property_inputs(seed, tf.float32)
        grads = values.rounded_normal(values.rng(seed + 1), pooled_shape, tf.float32)
        return [features, rois, grads]

    return Case(
        f"{op}_{suffix}_float32",
        make,
        lambda features, rois, grads: run(features, rois, grads, attrs),
    )


def _grad_property_case(op):
    forward_op = getattr(_ops, f"custom_ops_{op}")
    grad_op = getattr(_ops, f"custom_ops_{op}_grad")

    def run(features, rois, grads, attrs):
        extra = {}
        if op == "roi_pool":
            _, extra["argmax"] = forward_op(features, rois, **attrs)
        return grad_op(
            grads=grads,
            rois=rois,
            features_shape=tf.shape(features, out_type=tf.int32),
            **extra,
            **attrs,
        )

    return _gradient_op_case(op, "grad", run)


def _box_grad_property_case(op):
    box_grad_op = getattr(_ops, f"custom_ops_{op}_grad_boxes")
    return _gradient_op_case(
        op,
        "grad_boxes",
        lambda features, rois, grads, attrs: box_grad_op(
            grads=grads, features=features, rois=rois, **attrs
        ),
    )


_PROPERTY_VARIANTS = {
    "roi_pool": [(tf.bfloat16, "NHWC"), (tf.float64, "NCHW", tf.float64)],
    "roi_align": [(tf.float16, "NHWC"), (tf.bfloat16, "NHWC"), (tf.float64, "NHWC")]
    + [(tf.float32, "NCHW"), (tf.float64, "NCHW", tf.float64)],
    "ps_roi_pool": [(tf.float16, "NHWC"), (tf.float32, "NCHW")]
    + [(tf.float64, "NHWC", tf.float64)],
    "ps_roi_align": [(tf.float64, "NHWC", tf.float64)],
}


def _property_cases(op):
    return [_property_case(op)] + [
        _property_case(op, *variant) for variant in _PROPERTY_VARIANTS[op]
    ]


# --- Large shapes.


def _attrs(op, output_size):
    attrs = {"pooled_height": output_size, "pooled_width": output_size}
    if "align" in op:
        attrs["sampling_ratio"] = 2
    return attrs


def _large_shapes(test, op):
    raw = getattr(_ops, f"custom_ops_{op}")
    ps = op.startswith("ps_")

    def pooled(features, rois):
        return raw(features, rois, **_attrs(op, 2))

    # K beyond int32 and a 2^60-element feature map (PS ops divide its
    # channels into the 2 x 2 bins).
    specs = [
        tf.TensorSpec([MEGA, 2**10, 2**10, MEGA], tf.float32),
        tf.TensorSpec([BIG, 5], tf.float32),
    ]
    test.assertEqual(
        traced_shapes(pooled, *specs)[0], [BIG, 2, 2, MEGA // 4 if ps else MEGA]
    )
    # Valid inputs whose pooled output no tensor could have.
    specs[0] = tf.TensorSpec([1, 2, 2, 4 * BIG], tf.float32)
    with test.assertRaisesRegex(
        ValueError,
        r"pooled output \[1099511627776,2,2,\d+\]: its number of elements "
        r"overflows int64",
    ):
        traced_shapes(pooled, *specs)
    if op == "roi_align":
        # output_size sets the ops' int32 attrs: the wrapper names it.
        with test.assertRaisesRegex(
            ValueError, r"output_size must be below 2\*\*31, got 2147483648"
        ):
            traced_shapes(
                lambda f, r: tfco.roi_align(f, r, 2**31),
                tf.TensorSpec([1, 2, 2, 1], tf.float32),
                tf.TensorSpec([1, 5], tf.float32),
            )
    # argmax holds h * W + w in an int32: maps of 2^31 pixels are rejected.
    for data_format, shape in (
        ("NHWC", [0, 2**16, 2**15, 4]),
        ("NCHW", [0, 4, 2**16, 2**15]),
    ):
        with test.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            r"features height \* width must be below 2\^31, got 65536 \* 32768",
        ):
            raw(
                tf.zeros(shape),
                boxes.unit(0),
                data_format=data_format,
                **_attrs(op, 1),
            )
    # Huge and empty: K = 0 boxes on a map with 2^62 channels.
    test.assertEqual(
        tf.nest.flatten(raw(tf.zeros([0, 2, 2, HUGE]), boxes.unit(0), **_attrs(op, 2)))[
            0
        ].shape,
        [0, 2, 2, HUGE // 4 if ps else HUGE],
    )
    # K * PH * PW * C overflows int64: for PS ops through the channels of a
    # map with no pixels (C / (PH * PW) = 2^60), for the others through the
    # bins.
    if ps:
        features, output_size = tf.zeros([1, 0, 0, HUGE]), 2
        dims = f"2,2,{2**60}"
    else:
        features, output_size = tf.zeros([1, 2, 2, 4]), INT32_MAX
        dims = "2147483647,2147483647,4"
    with test.assertRaisesRegex(
        tf.errors.InvalidArgumentError,
        rf"pooled output \[4,{dims}\]: its number of elements overflows int64",
    ):
        raw(features, boxes.unit(4), **_attrs(op, output_size))
    if ps:
        return  # PS outputs are never larger than the features
    # 2^62 elements fit int64 but not memory: a clean allocation failure.
    with test.assertRaises(tf.errors.ResourceExhaustedError):
        raw(tf.zeros([1, 2, 2, 1]), boxes.unit(1), **_attrs(op, INT32_MAX))


def _grad_large_shapes(test, op):
    raw = getattr(_ops, f"custom_ops_{op}_grad")

    def grad(grads, features_shape, **attrs):
        extra = {}
        if op == "roi_pool":
            # Cast, not zeros_like: an int32 Shape cannot hold 2^31 - 1.
            extra["argmax"] = tf.cast(grads, tf.int32)
        return raw(
            grads=grads,
            rois=boxes.unit(0),
            features_shape=features_shape,
            **extra,
            **attrs,
        )

    def traced(features_shape):
        return traced_shapes(
            lambda g: grad(g, tf.constant(features_shape), **_attrs(op, 1)),
            tf.TensorSpec([None, 1, 1, None], tf.float32),
        )

    # The shape comes from features_shape's value, each dim below 2^31;
    # 2^63 - 2^32 elements still fit int64, (2^31 - 1)^3 do not.
    fits = [INT32_MAX, 2**15, 2**15, 4]
    test.assertEqual(traced(fits), [fits])
    overflows = [INT32_MAX, INT32_MAX, 1, INT32_MAX]
    with test.assertRaisesRegex(
        ValueError,
        r"features_shape \[2147483647,2147483647,1,2147483647\]: its number "
        r"of elements overflows int64",
    ):
        traced(overflows)
    with test.assertRaisesRegex(
        tf.errors.InvalidArgumentError,
        r"features_shape \[2147483647,2147483647,1,2147483647\]: its number "
        r"of elements overflows int64",
    ):
        grad(tf.zeros([0, 1, 1, INT32_MAX]), overflows, **_attrs(op, 1))
    with test.assertRaisesRegex(
        tf.errors.InvalidArgumentError,
        r"features_shape height \* width must be below 2\^31",
    ):
        grad(tf.zeros([0, 1, 1, 4]), [1, 2**16, 2**15, 4], **_attrs(op, 1))
    # Huge and empty: the gradient of a map with no images.
    empty_shape = [0, 2**15, 2**15, INT32_MAX]
    test.assertEqual(
        grad(tf.zeros([0, 1, 1, INT32_MAX]), empty_shape, **_attrs(op, 1)).shape,
        empty_shape,
    )


def _box_grad_large_shapes(test, op):
    raw = getattr(_ops, f"custom_ops_{op}_grad_boxes")
    ps = op.startswith("ps_")

    def box_grad(grads, features, rois):
        return raw(grads=grads, features=features, rois=rois, **_attrs(op, 2))

    # K beyond int32 on a 2^60-element feature map: the result is [K, 5].
    channels = MEGA // 4 if ps else MEGA
    specs = [
        tf.TensorSpec([BIG, 2, 2, channels], tf.float32),
        tf.TensorSpec([MEGA, 2**10, 2**10, MEGA], tf.float32),
        tf.TensorSpec([BIG, 5], tf.float32),
    ]
    test.assertEqual(traced_shapes(box_grad, *specs)[0], [BIG, 5])
    # Huge and empty: no boxes on a map with 2^62 channels.
    empty = box_grad(
        tf.zeros([0, 2, 2, HUGE // 4 if ps else HUGE]),
        tf.zeros([0, 2, 2, HUGE]),
        boxes.unit(0),
    )
    test.assertEqual(empty.shape, [0, 5])


# --- Gradient cases (C++ gradients against numeric Jacobians).


def _gradient_cases(op):
    fn = getattr(tfco, op)
    cases = []
    for data_format in ("NHWC", "NCHW"):
        shape = (2, 4, 5, 4) if data_format == "NHWC" else (2, 4, 4, 5)
        variants = [{}]
        if "align" in op:
            variants = [
                {"sampling_ratio": -1, "aligned": True},
                {"sampling_ratio": 2, "aligned": False},
            ]
        for attrs in variants:
            cases.append(
                Case(
                    f"{data_format}_{attrs}",
                    lambda seed, s=shape: [values.normal(seed + 1, *s), boxes.SMOOTH],
                    lambda x, rois, a=attrs, d=data_format: fn(
                        x, rois, 2, spatial_scale=0.5, data_format=d, **a
                    ),
                    (0,),
                )
            )
    # Per-image boxes with box_counts, which CustomOps>RoiBoxCounts checks.
    cases.append(
        Case(
            "NHWC_box_counts",
            lambda seed: [values.normal(seed + 1, 2, 4, 5, 4), boxes.SMOOTH_PER_IMAGE],
            lambda x, rois: fn(
                x, rois, 2, spatial_scale=0.5, box_counts=boxes.SMOOTH_COUNTS
            ),
            (0,),
        )
    )
    # float64 boxes (with the float64 features values.normal makes), with
    # coordinates float32 cannot hold; the layout does not touch them.
    cases.append(
        Case(
            "NHWC_float64_boxes",
            lambda seed: [values.normal(seed + 1, 2, 4, 5, 4), boxes.SMOOTH64],
            lambda x, rois, a=variants[0]: fn(x, rois, 2, spatial_scale=0.5, **a),
            (0,),
        )
    )
    return cases


# --- Fuzz hints: inputs with the structure the ops expect, with their own
# ways of being wrong (boxes on images that do not exist, argmax outside the
# map, a features_shape too large to allocate) mixed in and tagged.

# Feature sizes whose gradient map overflows or is too large to allocate.
_HUGE_FEATURE_DIMS = [2**31 - 1, 2**30, 65536, 46341, -1, -(2**31)]


def _layout(attrs, n, h, w, c):
    return [n, c, h, w] if attrs.get("data_format") == "NCHW" else [n, h, w, c]


@st.composite
def _geometry(draw, op_def, attrs):
    """Feature sizes (N, H, W, C, output C) and pooled output sizes."""
    pooled_h = arrays.small_dim(attrs.get("pooled_height"))
    pooled_w = arrays.small_dim(attrs.get("pooled_width"))
    n = draw(st.sampled_from([0, 1, 1, 2, 3]))
    h, w = draw(st.sampled_from([0, 1, 2, 5, 9])), draw(st.sampled_from([0, 1, 3, 8]))
    out_c = draw(st.integers(1, 3))
    in_c = (
        out_c * pooled_h * pooled_w if op_def.name.startswith("CustomOps>Ps") else out_c
    )
    return (n, h, w, in_c, out_c), (pooled_h, pooled_w)


@st.composite
def _fuzzed_boxes(draw, attrs, rng, n, h, w):
    """boxes.fuzzed as the case's Tboxes: float32 or float64 values, else an
    array of that type, which the op must reject."""
    rois, tags = draw(boxes.fuzzed(rng, n, h, w, attrs.get("spatial_scale")))
    dtype = attrs.get("Tboxes", types_pb2.DT_FLOAT)
    if dtype in (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE):
        return rois.astype(tf.as_dtype(dtype).as_numpy_dtype), tags
    return arrays.make_array(rng, dtype, rois.shape), tags


@st.composite
def _fuzz_forward(draw, op_def, attrs, rng):
    (n, h, w, c, _), _ = draw(_geometry(op_def, attrs))
    features = arrays.make_array(
        rng, arrays.float_type(attrs), _layout(attrs, n, h, w, c)
    )
    rois, tags = draw(_fuzzed_boxes(attrs, rng, n, h, w))
    return {"features": features, "rois": rois}, tags


@st.composite
def _fuzz_backward(draw, op_def, attrs, rng):
    (n, h, w, c, out_c), (pooled_h, pooled_w) = draw(_geometry(op_def, attrs))
    rois, tags = draw(_fuzzed_boxes(attrs, rng, n, h, w))
    grads_shape = _layout(attrs, rois.shape[0], pooled_h, pooled_w, out_c)
    inputs = {
        "grads": arrays.make_array(rng, arrays.float_type(attrs), grads_shape),
        "rois": rois,
    }
    features_shape = np.array(_layout(attrs, n, h, w, c), np.int32)
    if draw(st.integers(0, 5)) == 0:
        features_shape[draw(st.integers(0, 3))] = draw(
            st.sampled_from(_HUGE_FEATURE_DIMS)
        )
        tags += ("huge_features_shape",)
    inputs["features_shape"] = features_shape
    if any(arg.name == "argmax" for arg in op_def.input_arg):
        # Flat h * width + w positions, -1 for an empty bin.
        argmax = rng.integers(-1, max(h * w, 1), grads_shape).astype(np.int32)
        if argmax.size and draw(st.integers(0, 4)) == 0:
            argmax.flat[draw(st.integers(0, argmax.size - 1))] = draw(
                st.sampled_from([-2, h * w, 2**31 - 1, -(2**31)])
            )
            tags += ("bad_argmax",)
        inputs["argmax"] = argmax
    return inputs, tags


@st.composite
def _fuzz_box_grad(draw, op_def, attrs, rng):
    (n, h, w, c, out_c), (pooled_h, pooled_w) = draw(_geometry(op_def, attrs))
    dtype = arrays.float_type(attrs)
    rois, tags = draw(_fuzzed_boxes(attrs, rng, n, h, w))
    grads_shape = _layout(attrs, rois.shape[0], pooled_h, pooled_w, out_c)
    return {
        "grads": arrays.make_array(rng, dtype, grads_shape),
        "features": arrays.make_array(rng, dtype, _layout(attrs, n, h, w, c)),
        "rois": rois,
    }, tags


# --- Goldens: a [2, 4, 5, 8] NHWC map (8 channels divide into 2 x 2 PS bins),
# the golden boxes, and 2 x 2 output bins.

_GOLDEN_FEATURES_SHAPE = (2, 4, 5, 8)
_GOLDEN_ATTRS = {
    "pooled_height": attr_value_pb2.AttrValue(i=2),
    "pooled_width": attr_value_pb2.AttrValue(i=2),
}


def _golden_boxes(dtype):
    """boxes.GOLDEN as the rois of `dtype` (float32 before Tboxes)."""
    return boxes.GOLDEN.astype(dtype.as_numpy_dtype)


def _golden_tie_types(attrs):
    """float64 boxes (Tboxes) need float64 features (T)."""
    if "Tboxes" in attrs and attrs["Tboxes"].type == tf.float64.as_datatype_enum:
        attrs = dict(attrs, T=attr_value_pb2.AttrValue(type=attrs["Tboxes"].type))
    return attrs


def _golden_forward_inputs(dtypes, rng):
    return [
        values.small_values(_GOLDEN_FEATURES_SHAPE, dtypes[0], rng),
        _golden_boxes(dtypes[1]),
    ]


def _golden_pooled_grads(out_channels):
    def build(dtypes, rng):
        shape = (len(boxes.GOLDEN), 2, 2, out_channels)
        # RoiPool's argmax output (int32) gets a zero upstream gradient.
        return [
            values.small_values(shape, d, rng)
            if d.is_floating
            else np.zeros(shape, np.int32)
            for d in dtypes
        ]

    return build


def _golden_box_grad_inputs(out_channels):
    def build(dtypes, rng):
        grads = _golden_pooled_grads(out_channels)(dtypes[:1], rng)[0]
        features = values.small_values(_GOLDEN_FEATURES_SHAPE, dtypes[1], rng)
        return [grads, features, _golden_boxes(dtypes[2])]

    return build


def _golden_gradient_op_inputs(out_channels, with_argmax):
    def build(dtypes, rng):
        grads = _golden_pooled_grads(out_channels)(dtypes[:1], rng)[0]
        arrays_ = [grads, _golden_boxes(dtypes[1])]
        if with_argmax:  # -1 (empty bin) or a pixel of the 4 x 5 map
            arrays_.append(rng.integers(-1, 20, size=grads.shape).astype(np.int32))
        return arrays_ + [np.array(_GOLDEN_FEATURES_SHAPE, np.int32)]

    return build


# XLA's CPU backend lets LLVM fuse multiply-adds into FMAs (in the bilinear
# sums and in the sample positions, which can move a sample by one ulp), and
# the gradients add each pixel's terms in sample order rather than box order.
# The error scales with ulp(position) times the feature gradient: below 1e-5
# for these small maps of unit-scale features.
_ALIGN_XLA_TOLERANCE = {
    "float16": (1e-3, 1e-3, "FMA fusion, then rounding to half"),
    "bfloat16": (1e-2, 1e-2, "FMA fusion, then rounding to bfloat16"),
    "float32": (1e-5, 1e-5, "FMA fusion and gradient summation order"),
    "float64": (1e-13, 1e-13, "FMA fusion and gradient summation order"),
}


def _shape_errors(op):
    """Position-sensitive pooling needs channels divisible by its bins."""
    if not op.startswith("ps_"):
        return []
    forward = getattr(_ops, f"custom_ops_{op}")
    return [
        (
            Case(
                "indivisible_channels",
                lambda seed: [np.zeros([1, 4, 4, 6]), np.array([[0.0, 0, 0, 2, 2]])],
                lambda f, r: forward(
                    f, r, pooled_height=2, pooled_width=2, spatial_scale=1.0
                ),
            ),
            r"features channels \(6\) must be divisible",
        )
    ]


def _entries():
    entries = []
    for op, name in OPS.items():
        out_channels = 2 if op.startswith("ps_") else 8
        entries.append(
            Entry(
                f"CustomOps>{name}",
                large_shapes=lambda test, op=op: _large_shapes(test, op),
                property_cases=lambda op=op: _property_cases(op),
                gradient_cases=lambda op=op: _gradient_cases(op),
                fuzz_hint=_fuzz_forward,
                xla_tolerance=_ALIGN_XLA_TOLERANCE if "align" in op else {},
                xla_custom_call=True,
                xla_shape_errors=lambda op=op: _shape_errors(op),
                golden=Override(
                    inputs=_golden_forward_inputs,
                    attrs=_GOLDEN_ATTRS,
                    tie_types=_golden_tie_types,
                    output_grads=_golden_pooled_grads(out_channels),
                    redefined_gradients=(
                        {1: f"box gradient ({name}GradBoxes), was zero"}
                        if "align" in op
                        else {}
                    ),
                ),
            )
        )
        entries.append(
            Entry(
                f"CustomOps>{name}Grad",
                large_shapes=lambda test, op=op: _grad_large_shapes(test, op),
                property_cases=lambda op=op: [_grad_property_case(op)],
                fuzz_hint=_fuzz_backward,
                golden=Override(
                    inputs=_golden_gradient_op_inputs(out_channels, op == "roi_pool"),
                    attrs=_GOLDEN_ATTRS,
                    tie_types=_golden_tie_types,
                ),
            )
        )
        if "align" not in op:
            continue  # the pooling ops' box gradient is zero, with no op
        entries.append(
            Entry(
                f"CustomOps>{name}GradBoxes",
                large_shapes=lambda test, op=op: _box_grad_large_shapes(test, op),
                property_cases=lambda op=op: [_box_grad_property_case(op)],
                fuzz_hint=_fuzz_box_grad,
                golden=Override(
                    inputs=_golden_box_grad_inputs(out_channels),
                    attrs=_GOLDEN_ATTRS,
                    tie_types=_golden_tie_types,
                ),
            )
        )
    return entries


ENTRIES = _entries()
