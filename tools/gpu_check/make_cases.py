"""Writes the GPU check's cases: inputs, and the outputs the CPU kernels give.

    bazel run //tools/gpu_check:make_cases -- OUT_FILE

Every functor with a GPU kernel gets cases in every dtype its GPU kernel is
built for: RoI ops forward and backward in both layouts, with degenerate and
off-map boxes, no boxes, and sizes that need several passes of the kernels'
grid-stride loops; MatrixMul in every transpose case; ClipByGlobalNorm over
many tensors, with inf and NaN; CheckNumericsN; ZeroOut; and the box check of
the XLA GPU lowering (RoiCheckBoxes). The expected outputs
come from this library's CPU kernels, which are bitwise deterministic, so the
file is the same byte for byte each time it is written.

Each case carries its tolerance, |gpu - cpu| <= atol + rtol * |cpu| per
element, with NaN only where the CPU has NaN and infinities equal (see
_TOLERANCES; exact where both kernels do the same operations).
"""

import argparse
import sys

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.kernel_tests import roi_test_util
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import boxes
from tools.gpu_check import case_file

_ops = load_library.load_op_library()

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

# Ops whose GPU kernels run no GPU code, so nothing here to check: RoiBoxCounts
# checks its counts in host memory and reads only the shapes of its inputs on
# the device; CheckCondition reads its condition in host memory and passes its
# values through.
NO_GPU_FUNCTOR = ("CheckCondition", "RoiBoxCounts")
_TF_DTYPES = {
    "float16": tf.float16,
    "bfloat16": tf.bfloat16,
    "float32": tf.float32,
    "float64": tf.float64,
    "int32": tf.int32,
    "int64": tf.int64,
    "int8": tf.int8,
    "uint8": tf.uint8,
}

# (rtol, atol as a fraction of the largest expected magnitude) by kind:
#  - "sum": float sums in another order or with fused multiply-adds (nvcc
#    contracts a * b + c, the CPU kernels do not): a few units in the last
#    place of the accumulator, and one rounding step of half and bfloat16
#    outputs (2^-10 and 2^-7 relative, so two steps are allowed). Fused
#    arithmetic also moves RoiAlign's sample positions by an ulp of the
#    coordinate, which changes a sample by that much times the local slope of
#    the features: hence atol of 1e-5 of the output's scale in float32.
#  - "atomic": the GPU backward passes add into the feature gradient with
#    atomics in the gradient's own dtype, so half and bfloat16 gradients
#    round after every contribution where the CPU rounds once.
#  - "exact": both kernels do the same operations (selection, copies, flags,
#    a double-precision norm rounded once).
_TOLERANCES = {
    "sum": {
        "float16": (2e-3, 1e-3),
        "bfloat16": (1.6e-2, 8e-3),
        "float32": (1e-5, 1e-5),
        "float64": (1e-12, 1e-12),
    },
    "atomic": {
        "float16": (2e-2, 1e-2),
        "bfloat16": (1e-1, 5e-2),
        "float32": (1e-5, 1e-5),
        "float64": (1e-12, 1e-12),
    },
}


def _tolerance(kind, dtype, outputs):
    if kind == "exact":
        return {"rtol": 0.0, "atol": 0.0}
    rtol, atol = _TOLERANCES[kind][dtype]
    finite = [t.as_float64() for t in outputs.values()]
    finite = [np.abs(v[np.isfinite(v)]) for v in finite]
    scale = max([float(v.max()) for v in finite if v.size] + [0.0])
    return {"rtol": rtol, "atol": atol * scale}


def _to_file(x, dtype):
    """A TensorFlow tensor or NumPy array as a case_file.Tensor of `dtype`."""
    x = tf.convert_to_tensor(x)
    if dtype == "bfloat16":
        return case_file.Tensor(
            dtype, case_file.bfloat16_bits(tf.cast(x, tf.float32).numpy())
        )
    return case_file.Tensor(dtype, tf.cast(x, _TF_DTYPES[dtype]).numpy())


def _normal(rng, shape, dtype):
    """Random values rounded to `dtype`, as a TensorFlow tensor."""
    return tf.cast(rng.standard_normal(shape), _TF_DTYPES[dtype])


def _case(name, op, attrs, inputs, outputs, kind, dtype):
    """A case whose tensors are (value, dtype) pairs."""
    inputs = {k: _to_file(v, t) for k, (v, t) in inputs.items()}
    outputs = {k: _to_file(v, t) for k, (v, t) in outputs.items()}
    attrs = dict(attrs, **_tolerance(kind, dtype, outputs))
    return case_file.Case(name, op, attrs, inputs, outputs)


# --- RoI ops: (op, functor, variants of (spatial_scale, sampling_ratio, aligned)).

_ROI_OPS = [
    ("roi_pool", "RoiPool", [(1.0, None, None), (0.5, None, None)]),
    ("roi_align", "RoiAlign", [(1.0, -1, False), (0.5, 2, True)]),
    ("ps_roi_pool", "PsRoiPool", [(1.0, None, None), (0.5, None, None)]),
    ("ps_roi_align", "PsRoiAlign", [(1.0, -1, True), (0.5, 2, False)]),
]


def _roi_attrs(op, output_size, spatial_scale, sampling_ratio, aligned, data_format):
    attrs = {
        "pooled_height": output_size[0],
        "pooled_width": output_size[1],
        "spatial_scale": spatial_scale,
    }
    if sampling_ratio is not None:
        attrs.update(sampling_ratio=sampling_ratio, aligned=aligned)
    op_attrs = dict(attrs, data_format=data_format)
    return dict(attrs, nchw=float(data_format == "NCHW")), op_attrs


def _roi_cases(
    name, op, functor, features, rois, output_size, variant, dtype, data_format, seed
):
    """The forward and the backward case of one RoI op call."""
    attrs, op_attrs = _roi_attrs(op, output_size, *variant, data_format)
    x = tf.cast(features, _TF_DTYPES[dtype])
    if data_format == "NCHW":
        x = tf.transpose(x, [0, 3, 1, 2])
    # A tensor keeps float64 boxes float64 (Tboxes); the op wrapper would
    # convert a NumPy array to Tboxes' default, float32.
    rois = tf.constant(rois)
    forward = getattr(_ops, "custom_ops_" + op)(x, rois, **op_attrs)
    pooled = forward[0] if functor == "RoiPool" else forward
    outputs = {"pooled": (pooled, dtype)}
    if functor == "RoiPool":
        outputs["argmax"] = (forward[1], "int32")
    kind = "exact" if functor == "RoiPool" else "sum"
    boxes_dtype = rois.dtype.name  # float32, or float64 (Tboxes)
    inputs = {"features": (x, dtype), "rois": (rois, boxes_dtype)}
    cases = []
    if pooled.shape.num_elements():  # the op launches nothing otherwise
        cases.append(_case(name + "/fwd", functor, attrs, inputs, outputs, kind, dtype))

    grads = _normal(np.random.default_rng(seed), pooled.shape, dtype)
    grad_inputs = [grads, rois]
    if functor == "RoiPool":
        grad_inputs.append(forward[1])
    grad_inputs.append(tf.shape(x))
    grad = getattr(_ops, "custom_ops_" + op + "_grad")(*grad_inputs, **op_attrs)
    inputs = dict(inputs, grads=(grads, dtype))
    if functor == "RoiPool":
        inputs["argmax"] = (forward[1], "int32")
    outputs = {"grad_features": (grad, dtype)}
    cases.append(
        _case(name + "/grad", functor + "Grad", attrs, inputs, outputs, "atomic", dtype)
    )
    if functor.endswith("Align") and pooled.shape.num_elements():
        # One box per block, summed in a fixed order: "sum", not "atomic".
        box_grad = getattr(_ops, "custom_ops_" + op + "_grad_boxes")(
            grads=grads, features=x, rois=rois, **op_attrs
        )
        inputs = {
            "grads": (grads, dtype),
            "features": (x, dtype),
            "rois": (rois, boxes_dtype),
        }
        outputs = {"grad_rois": (box_grad, boxes_dtype)}
        cases.append(
            _case(
                name + "/grad_boxes",
                functor + "GradBoxes",
                attrs,
                inputs,
                outputs,
                "sum",
                dtype,
            )
        )
    return cases


def roi_cases():
    cases = []
    for op, functor, variants in _ROI_OPS:
        ps = op.startswith("ps_")
        for i, variant in enumerate(variants):
            for dtype in FLOAT_DTYPES:
                for data_format in ("NHWC", "NCHW"):
                    case = roi_test_util.make_case(
                        op, seed=i, spatial_scale=variant[0], output_size=(3, 2)
                    )
                    name = f"{op}/{dtype}/{data_format}/variant{i}"
                    cases += _roi_cases(
                        name,
                        op,
                        functor,
                        case.features_nhwc,
                        case.rois,
                        case.output_size,
                        variant,
                        dtype,
                        data_format,
                        seed=i,
                    )
        # float64 boxes (with float64 features) that float32 cannot hold.
        for data_format in ("NHWC", "NCHW"):
            case = roi_test_util.float64_boxes_case(op, seed=11)
            cases += _roi_cases(
                f"{op}/float64/{data_format}/float64_boxes",
                op,
                functor,
                case.features_nhwc,
                case.rois,
                case.output_size,
                variants[1],
                "float64",
                data_format,
                seed=11,
            )
        # No boxes: the backward still writes a zero gradient.
        rng = np.random.default_rng(7)
        features = rng.standard_normal((2, 5, 6, 8 if ps else 3))
        no_rois = np.zeros((0, 5), np.float32)
        for data_format in ("NHWC", "NCHW"):
            cases += _roi_cases(
                f"{op}/float32/{data_format}/no_boxes",
                op,
                functor,
                features,
                no_rois,
                (2, 2),
                variants[0],
                "float32",
                data_format,
                seed=7,
            )
        if op in ("roi_align", "ps_roi_align"):
            cases += _grouped_channel_cases(op, functor)
        if op == "roi_align":
            cases += _many_boxes_cases()
    return cases


def _grouped_channel_cases(op, functor):
    """An align op with four output channels, which its GPU kernels compute
    four channels per thread."""
    cases = []
    channels = 4 * 3 * 2 if op.startswith("ps_") else 4
    for dtype in FLOAT_DTYPES:
        for data_format in ("NHWC", "NCHW"):
            rng = np.random.default_rng(9)
            features = rng.standard_normal((2, 9, 11, channels))
            rois = boxes.edge_cases(rng, 2, 9, 11, 1.0)
            cases += _roi_cases(
                f"{op}/{dtype}/{data_format}/channels4",
                op,
                functor,
                features,
                rois,
                (3, 2),
                (1.0, -1, True),
                dtype,
                data_format,
                seed=9,
            )
    return cases


def _many_boxes_cases():
    """RoiAlign with an output larger than one wave of threads on current GPUs
    (132 multiprocessors x 2048 threads), so the grid-stride loops, the same
    in every RoI kernel, make several passes."""
    rng = np.random.default_rng(8)
    features = rng.standard_normal((2, 24, 24, 20))
    rois = np.concatenate([boxes.edge_cases(rng, 2, 24, 24, 1.0) for _ in range(20)])
    return _roi_cases(
        "roi_align/float32/NHWC/many_boxes",
        "roi_align",
        "RoiAlign",
        features,
        rois,
        (7, 7),
        (1.0, 2, True),
        "float32",
        "NHWC",
        seed=8,
    )


# --- MatrixMul.


def matrix_mul_cases():
    cases = []
    shapes = [("odd", 37, 53, 29), ("wide", 5, 200, 67)]
    for dtype in FLOAT_DTYPES:
        for label, m, k, n in shapes + (
            [("empty_inner", 17, 0, 9)] if dtype == "float32" else []
        ):
            for transpose_a in (False, True):
                for transpose_b in (False, True):
                    rng = np.random.default_rng(m * k * n)
                    a = _normal(rng, (k, m) if transpose_a else (m, k), dtype)
                    b = _normal(rng, (n, k) if transpose_b else (k, n), dtype)
                    product = _ops.custom_ops_matrix_mul(
                        a, b, transpose_a=transpose_a, transpose_b=transpose_b
                    )
                    flags = f"ta{int(transpose_a)}_tb{int(transpose_b)}"
                    name = f"matrix_mul/{dtype}/{label}/{flags}"
                    cases.append(
                        _case(
                            name,
                            "MatrixMul",
                            {"transpose_a": transpose_a, "transpose_b": transpose_b},
                            {"a": (a, dtype), "b": (b, dtype)},
                            {"product": (product, dtype)},
                            "sum",
                            dtype,
                        )
                    )
    return cases


# --- ClipByGlobalNorm and its gradient.

_CLIP_SCENARIOS = {
    # name: (clip_norm, value planted in tensor 3, or None)
    "clipping": (1.0, None),
    "not_clipping": (1e4, None),
    "inf": (1.0, np.inf),
    "nan": (1.0, np.nan),
}


def _clip_shapes(rng, large):
    """40 tensors: a scalar, an empty one, and one of `large` elements, which
    can take every slot of partial sums several times."""
    shapes = [(), (0, 3), (large,)]
    shapes += [tuple(rng.integers(1, 9, size=rng.integers(1, 4))) for _ in range(37)]
    return shapes


def clip_cases():
    cases = []
    for dtype in FLOAT_DTYPES:
        for scenario, (clip_norm, planted) in _CLIP_SCENARIOS.items():
            rng = np.random.default_rng(len(cases))
            shapes = _clip_shapes(rng, 30000 if scenario == "clipping" else 3000)
            values = [rng.standard_normal(s) * 0.05 for s in shapes]
            if planted is not None:
                values[3].flat[0] = planted
            t = [tf.cast(v, _TF_DTYPES[dtype]) for v in values]
            dclipped = [_normal(rng, s, dtype) for s in shapes]
            clip = tf.constant(clip_norm, _TF_DTYPES[dtype])
            dglobal_norm = _normal(rng, (), dtype)
            clipped, global_norm = _ops.custom_ops_clip_by_global_norm(t, clip)
            dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
                t, clip, dclipped, dglobal_norm
            )
            inputs = {f"t{i}": (x, dtype) for i, x in enumerate(t)}
            inputs["clip_norm"] = (clip, dtype)
            name = f"clip_by_global_norm/{dtype}/{scenario}"
            outputs = {f"clipped{i}": (x, dtype) for i, x in enumerate(clipped)}
            outputs["global_norm"] = (global_norm, dtype)
            attrs = {"num_tensors": len(t)}
            cases.append(
                _case(
                    name + "/fwd",
                    "ClipByGlobalNorm",
                    attrs,
                    inputs,
                    outputs,
                    "sum",
                    dtype,
                )
            )
            inputs.update({f"dclipped{i}": (x, dtype) for i, x in enumerate(dclipped)})
            inputs["dglobal_norm"] = (dglobal_norm, dtype)
            outputs = {f"dt{i}": (x, dtype) for i, x in enumerate(dt)}
            outputs["dclip_norm"] = (dclip_norm, dtype)
            cases.append(
                _case(
                    name + "/grad",
                    "ClipByGlobalNormGrad",
                    attrs,
                    inputs,
                    outputs,
                    "sum",
                    dtype,
                )
            )
    return cases


# --- CheckNumericsN: the functor's per-tensor flags (1 NaN, 2 Inf).


def _cpu_flags(x):
    """The flags the CPU kernel found in x, read from its error message."""
    try:
        _ops.custom_ops_check_numerics_n([x], message="gpu_check")
    except tf.errors.InvalidArgumentError as e:
        found = e.message.split("found ", 1)[1].split(" in tensors", 1)[0]
        return {"NaN": 1, "Inf": 2, "NaN and Inf": 3}[found]
    return 0


def check_numerics_cases():
    cases = []
    for dtype in FLOAT_DTYPES:
        rng = np.random.default_rng(len(cases))
        # A NaN at the end of a tensor that takes several grid-stride passes
        # (odd, so the last pass is partial).
        large = 300001
        plants = [
            [],
            [(large - 1, np.nan)],
            [(0, np.inf)],
            [(5, -np.inf), (500, np.nan)],
        ]
        tensors = []
        for plant in plants:
            x = rng.standard_normal(
                large if plant and plant[0][0] == large - 1 else 1001
            )
            for index, value in plant:
                x[index] = value
            tensors.append(tf.cast(x, _TF_DTYPES[dtype]))
        flags = np.array([_cpu_flags(x) for x in tensors], np.int32)
        cases.append(
            _case(
                f"check_numerics_n/{dtype}",
                "CheckNumericsN",
                {"num_tensors": len(tensors)},
                {f"x{i}": (x, dtype) for i, x in enumerate(tensors)},
                {"flags": (flags, "int32")},
                "exact",
                dtype,
            )
        )
    return cases


# --- The XLA GPU lowering's box check (TfcoRoiCheckBoxes), no op of its own.


def roi_check_boxes_cases():
    """Boxes that the kernels reject become the null box (roi_geometry.h's
    RoiOk and NullBox): a batch index out of range or fractional, a coordinate
    that is not finite or beyond 2^30 pixels once scaled."""
    rois = np.array(
        [
            [1, 0.5, 1, 4, 5],
            [2, 1, 1, 2, 2],
            [-1, 0, 0, 1, 1],
            [0.5, 0, 0, 1, 1],
            [0, np.nan, 0, 1, 1],
            [0, 1, -np.inf, 1, 1],
            [0, 1, 1, 3e9, 2],
            [0, -1, -2, 3, 4],
        ],
        np.float32,
    )
    cases = []
    for batch, spatial_scale, dtype in (
        (2, 1.0, "float32"),
        (3, 0.25, "float32"),
        (3, 0.25, "float64"),
    ):
        boxes_ = rois.astype(dtype)
        if dtype == "float64":  # whole batch indices, finer coordinates
            boxes_[:, 1:] += 1e-4
        scale = np.float32(spatial_scale)
        index = boxes_[:, 0]
        with np.errstate(invalid="ignore"):
            ok = (
                np.all(np.isfinite(boxes_), axis=1)
                & np.all(np.abs(boxes_[:, 1:].astype(np.float64) * scale) <= 2.0**30, 1)
                & (index == np.floor(index))
                & (index >= 0)
                & (index < batch)
            )
        null = np.array([0] + [np.float32(-4) / scale] * 4, dtype)
        checked = np.where(ok[:, None], boxes_, null)
        cases.append(
            _case(
                f"roi_check_boxes/batch{batch}/scale{spatial_scale}/{dtype}",
                "RoiCheckBoxes",
                {"batch": batch, "spatial_scale": spatial_scale},
                {"rois": (boxes_, dtype)},
                {"checked": (checked, dtype)},
                "exact",
                dtype,
            )
        )
    return cases


# --- ZeroOut.

ZERO_OUT_DTYPES = (
    "int64",
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
)


def zero_out_cases():
    cases = []
    for dtype in ZERO_OUT_DTYPES:
        rng = np.random.default_rng(len(cases))
        x = tf.cast(rng.integers(-100, 100, size=(3, 2221)), _TF_DTYPES[dtype])
        for keep in (0, 1, 12345, 10**9):
            y = _ops.custom_ops_zero_out(x, keep=keep)
            cases.append(
                _case(
                    f"zero_out/{dtype}/keep{keep}",
                    "ZeroOut",
                    {"keep": keep},
                    {"x": (x, dtype)},
                    {"y": (y, dtype)},
                    "exact",
                    dtype,
                )
            )
    return cases


# --- DeformableConv2d and its gradient: (label, n, c, h, w, o, kh, kw,
# groups, offset groups, stride, pad, dilation, mask); offsets reach off the
# map, and the first case puts NaN and infinite offsets in (at its last
# pixel, so that the first elements stay finite).
_DCN_CASES = [
    ("plain", 2, 6, 9, 11, 4, 3, 3, 1, 1, (1, 1), (1, 1), (1, 1), True),
    ("groups", 1, 8, 7, 6, 6, 2, 3, 2, 4, (2, 1), (0, 2), (1, 2), True),
    ("nomask", 3, 4, 5, 5, 2, 3, 1, 1, 2, (1, 2), (2, 0), (2, 1), False),
    ("empty_batch", 0, 4, 5, 5, 2, 3, 3, 1, 1, (1, 1), (1, 1), (1, 1), True),
    # More than one tile of the GPU kernels' products along every dimension.
    ("wide", 1, 96, 10, 9, 80, 3, 3, 1, 2, (1, 1), (1, 1), (1, 1), True),
]


def deformable_conv2d_cases():
    cases = []
    for dtype in FLOAT_DTYPES:
        for label, n, c, h, w, o, kh, kw, groups, og, s, p, d, masked in _DCN_CASES:
            ho = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
            wo = (w + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
            for data_format in ("NHWC", "NCHW"):
                rng = np.random.default_rng(len(cases))

                def shaped(
                    channels, height, width, scale=1.0, rng=rng, n=n, fmt=data_format
                ):
                    shape = (n, channels, height, width)
                    if fmt == "NHWC":
                        shape = (n, height, width, channels)
                    return _normal(rng, shape, "float64") * scale

                x = tf.cast(shaped(c, h, w), _TF_DTYPES[dtype])
                offset = shaped(2 * og * kh * kw, ho, wo, 2.0).numpy()
                if label == "plain":
                    offset.flat[-3:] = (np.nan, np.inf, -1e30)
                offset = tf.cast(offset, _TF_DTYPES[dtype])
                filt = _normal(rng, (kh, kw, c // groups, o), dtype)
                mask = (
                    tf.cast(tf.sigmoid(shaped(og * kh * kw, ho, wo)), _TF_DTYPES[dtype])
                    if masked
                    else tf.zeros([0], _TF_DTYPES[dtype])
                )
                dy = _normal(
                    rng,
                    (n, ho, wo, o) if data_format == "NHWC" else (n, o, ho, wo),
                    dtype,
                )
                attrs = {
                    "n": n, "h": h, "w": w, "c": c, "o": o, "kh": kh, "kw": kw,
                    "ho": ho, "wo": wo, "stride_h": s[0], "stride_w": s[1],
                    "dilation_h": d[0], "dilation_w": d[1], "pad_top": p[0],
                    "pad_left": p[1], "groups": groups, "offset_groups": og,
                    "nchw": int(data_format == "NCHW"), "use_mask": int(masked),
                }  # fmt: skip
                op_attrs = dict(
                    strides=[1, *s, 1] if data_format == "NHWC" else [1, 1, *s],
                    dilations=[1, *d, 1] if data_format == "NHWC" else [1, 1, *d],
                    padding="EXPLICIT",
                    explicit_paddings=(
                        [0, 0, p[0], p[0], p[1], p[1], 0, 0]
                        if data_format == "NHWC"
                        else [0, 0, 0, 0, p[0], p[0], p[1], p[1]]
                    ),
                    offset_groups=og,
                    data_format=data_format,
                    use_mask=masked,
                )
                inputs = {
                    "input": (x, dtype),
                    "filter": (filt, dtype),
                    "offset": (offset, dtype),
                    "mask": (mask, dtype),
                }
                y = _ops.custom_ops_deformable_conv2d(x, filt, offset, mask, **op_attrs)
                name = f"deformable_conv2d/{dtype}/{data_format}/{label}"
                cases.append(
                    _case(
                        f"{name}/fwd", "DeformableConv2d", attrs, inputs,
                        {"output": (y, dtype)}, "sum", dtype,
                    )
                )  # fmt: skip
                grads = _ops.custom_ops_deformable_conv2d_grad(
                    x, filt, offset, mask, dy, **op_attrs
                )
                outputs = dict(
                    zip(
                        ("grad_input", "grad_filter", "grad_offset", "grad_mask"),
                        ((g, dtype) for g in grads),
                    )
                )
                if not masked:
                    del outputs["grad_mask"]
                cases.append(
                    _case(
                        f"{name}/grad", "DeformableConv2dGrad", attrs,
                        dict(inputs, grad_output=(dy, dtype)), outputs, "atomic",
                        dtype,
                    )
                )  # fmt: skip
    return cases


def all_cases():
    with tf.device("/CPU:0"):
        return (
            roi_cases()
            + roi_check_boxes_cases()
            + matrix_mul_cases()
            + clip_cases()
            + check_numerics_cases()
            + zero_out_cases()
            + deformable_conv2d_cases()
        )


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the case file to write")
    args = parser.parse_args(argv)
    cases = all_cases()
    case_file.write(args.out, cases)
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
