"""Per-op hints for the fuzzer: inputs with the structure an op expects.

Random shapes almost never make a valid RoI call or a matching matrix
product, so without these only the ops' validation would run. A hint is a
Hypothesis strategy factory `hint(op_def, attrs, rng)` that draws
`(inputs, tags)`: inputs keyed by input name, mostly valid for `attrs`, with
the op's own ways of being wrong (boxes on images that do not exist, argmax
outside the map, a features_shape too large to allocate) mixed in and named
in `tags`. Ops without a hint are fuzzed from their OpDef alone.
"""

import math

import numpy as np
from hypothesis import strategies as st
from tensorflow.core.framework import types_pb2

from tensorflow_customops.python.fuzz import op_cases

_BAD_BATCH_INDICES = [-1.0, 0.5, 1e10, 2.0**31, math.nan, math.inf, -math.inf]
_BAD_COORDINATES = [math.nan, math.inf, -math.inf, 1e30, -1e30, 3e38]
# Feature sizes whose gradient map overflows or is too large to allocate.
_HUGE_FEATURE_DIMS = [2**31 - 1, 2**30, 65536, 46341, -1, -(2**31)]


def _size(value, default=2):
    """An attr value usable as a tensor dimension (extreme ones are not)."""
    return value if isinstance(value, int) and 1 <= value <= 8 else default


def _float_type(attrs):
    # A disallowed T is fed as is: the op must reject it.
    return attrs.get("T", types_pb2.DT_FLOAT)


def _layout(attrs, n, h, w, c):
    return [n, c, h, w] if attrs.get("data_format") == "NCHW" else [n, h, w, c]


@st.composite
def _rois(draw, rng, batch, height, width, scale):
    """[K, 5] float32 boxes (batch_index, x1, y1, x2, y2) in image coordinates."""
    count = draw(st.sampled_from([0, 1, 2, 3, 6]))
    scale = scale if isinstance(scale, float) and 0 < scale < math.inf else 1.0
    image_w, image_h = max(width, 1) / scale, max(height, 1) / scale
    rois = np.zeros((count, 5), np.float32)
    with np.errstate(over="ignore"):  # A tiny spatial_scale makes huge boxes.
        rois[:, 0] = rng.integers(0, max(batch, 1), count)
        rois[:, 1] = rng.uniform(-0.3 * image_w, 1.3 * image_w, count)
        rois[:, 2] = rng.uniform(-0.3 * image_h, 1.3 * image_h, count)
        rois[:, 3] = rois[:, 1] + rng.uniform(-1, image_w, count)
        rois[:, 4] = rois[:, 2] + rng.uniform(-1, image_h, count)
    tags = ()
    if count and draw(st.integers(0, 5)) == 0:
        rois[draw(st.integers(0, count - 1)), 0] = draw(
            st.sampled_from(_BAD_BATCH_INDICES + [batch])
        )
        tags += ("bad_batch_index",)
    if count and draw(st.integers(0, 5)) == 0:
        row, col = draw(st.integers(0, count - 1)), draw(st.integers(1, 4))
        rois[row, col] = draw(st.sampled_from(_BAD_COORDINATES))
        tags += ("bad_coordinates",)
    return rois, tags


@st.composite
def _roi_geometry(draw, op_def, attrs):
    """Feature sizes (N, H, W, C) and pooled output sizes for an RoI op."""
    pooled_h = _size(attrs.get("pooled_height"))
    pooled_w = _size(attrs.get("pooled_width"))
    n = draw(st.sampled_from([0, 1, 1, 2, 3]))
    h, w = draw(st.sampled_from([0, 1, 2, 5, 9])), draw(st.sampled_from([0, 1, 3, 8]))
    out_c = draw(st.integers(1, 3))
    in_c = (
        out_c * pooled_h * pooled_w if op_def.name.startswith("CustomOps>Ps") else out_c
    )
    return (n, h, w, in_c, out_c), (pooled_h, pooled_w)


@st.composite
def roi_forward(draw, op_def, attrs, rng):
    (n, h, w, c, _), _ = draw(_roi_geometry(op_def, attrs))
    features = op_cases.make_array(rng, _float_type(attrs), _layout(attrs, n, h, w, c))
    rois, tags = draw(_rois(rng, n, h, w, attrs.get("spatial_scale")))
    return {"features": features, "rois": rois}, tags


@st.composite
def roi_backward(draw, op_def, attrs, rng):
    (n, h, w, c, out_c), (pooled_h, pooled_w) = draw(_roi_geometry(op_def, attrs))
    rois, tags = draw(_rois(rng, n, h, w, attrs.get("spatial_scale")))
    grads_shape = _layout(attrs, len(rois), pooled_h, pooled_w, out_c)
    inputs = {
        "grads": op_cases.make_array(rng, _float_type(attrs), grads_shape),
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
def matrix_mul(draw, op_def, attrs, rng):
    m, k, n = (draw(st.sampled_from([0, 1, 2, 3, 5])) for _ in range(3))
    a = [k, m] if attrs.get("transpose_a") else [m, k]
    b = [n, k] if attrs.get("transpose_b") else [k, n]
    dtype = _float_type(attrs)
    return {
        "a": op_cases.make_array(rng, dtype, a),
        "b": op_cases.make_array(rng, dtype, b),
    }, ()


@st.composite
def _tensor_list(draw, rng, dtype, count):
    shapes = [
        tuple(draw(st.lists(st.integers(0, 4), max_size=3))) for _ in range(count)
    ]
    return [op_cases.make_array(rng, dtype, s, -100, 100) for s in shapes]


def _clip_norm(rng, dtype):
    return op_cases.make_array(rng, dtype, (), 0, 10)


@st.composite
def clip_by_global_norm(draw, op_def, attrs, rng):
    dtype = _float_type(attrs)
    count = _size(attrs.get("N"), 1)
    return {
        "t": draw(_tensor_list(rng, dtype, count)),
        "clip_norm": _clip_norm(rng, dtype),
    }, ()


@st.composite
def clip_by_global_norm_grad(draw, op_def, attrs, rng):
    dtype = _float_type(attrs)
    t = draw(_tensor_list(rng, dtype, _size(attrs.get("N"), 1)))
    return {
        "t": t,
        "clip_norm": _clip_norm(rng, dtype),
        "dclipped": [op_cases.make_array(rng, dtype, x.shape) for x in t],
        "dglobal_norm": op_cases.make_array(rng, dtype, ()),
    }, ()


# ZeroOut and CheckNumericsN take any shape: the generic inputs suit them.
HINTS = {
    "CustomOps>RoiPool": roi_forward,
    "CustomOps>RoiAlign": roi_forward,
    "CustomOps>PsRoiPool": roi_forward,
    "CustomOps>PsRoiAlign": roi_forward,
    "CustomOps>RoiPoolGrad": roi_backward,
    "CustomOps>RoiAlignGrad": roi_backward,
    "CustomOps>PsRoiPoolGrad": roi_backward,
    "CustomOps>PsRoiAlignGrad": roi_backward,
    "CustomOps>MatrixMul": matrix_mul,
    "CustomOps>ClipByGlobalNorm": clip_by_global_norm,
    "CustomOps>ClipByGlobalNormGrad": clip_by_global_norm_grad,
}
