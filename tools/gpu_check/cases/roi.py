"""The RoI family's cases: the ops forward and backward in both layouts, with
degenerate and off-map boxes, no boxes, and sizes that need several passes of
the kernels' grid-stride loops; boxes that fail the checks, which the GPU
OpKernels raise on after computing on the null box; the box gradient; and
the box check that the XLA GPU lowering and the OpKernels share
(RoiCheckBoxes)."""

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.roi import roi_test_util
from tensorflow_customops.python.ops import load_library
from tensorflow_customops.python.registry import boxes
from tools.gpu_check.cases import (
    FLOAT_DTYPES,
    TF_DTYPES,
    case,
    normal,
    ops,
    xla_case,
)

# The boxes are float32 or float64 (Tboxes) and RoiPoolGrad's argmax int32,
# whatever the features' dtype.
FIXED_DTYPE_INPUTS = ("rois", "argmax")

# Whether XLA compiles the ops to custom calls into their kernels, with CUDA
# handlers where the kernels are built for CUDA (typed FFI).
XLA_CUSTOM_CALLS = tfco.build_info()["xla_custom_call_api"] == "typed_ffi"

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
    name,
    op,
    functor,
    features,
    rois,
    output_size,
    variant,
    dtype,
    data_format,
    seed,
    xla=False,
    given_rois=None,
):
    """The forward and the backward case of one RoI op call; with `xla`, also
    those of the custom calls that XLA compiles the ops to, through their CUDA
    handlers. `given_rois`, if any, are the boxes the kernels get, of which
    `rois` is the checked copy (_null_invalid)."""
    attrs, op_attrs = _roi_attrs(op, output_size, *variant, data_format)
    x = tf.cast(features, TF_DTYPES[dtype])
    if data_format == "NCHW":
        x = tf.transpose(x, [0, 3, 1, 2])
    given = rois if given_rois is None else given_rois
    # A tensor keeps float64 boxes float64 (Tboxes); the op wrapper would
    # convert a NumPy array to Tboxes' default, float32.
    rois = tf.constant(rois)
    forward = getattr(ops, "custom_ops_" + op)(x, rois, **op_attrs)
    pooled = forward[0] if functor == "RoiPool" else forward
    outputs = {"pooled": (pooled, dtype)}
    if functor == "RoiPool":
        outputs["argmax"] = (forward[1], "int32")
    kind = "exact" if functor == "RoiPool" else "sum"
    boxes_dtype = rois.dtype.name  # float32, or float64 (Tboxes)
    inputs = {"features": (x, dtype), "rois": (given, boxes_dtype)}
    # The CUDA handlers' operands end with the boxes' count, and their results
    # with their scratch, the checked boxes (roi_custom_call_gpu.cc).
    count = (np.int32(rois.shape[0]), "int32")
    checked = (
        _null_invalid(given, x.shape[0], variant[0]).astype(boxes_dtype),
        boxes_dtype,
    )
    cases = []
    if pooled.shape.num_elements():  # the op launches nothing otherwise
        cases.append(case(name + "/fwd", functor, attrs, inputs, outputs, kind, dtype))
    if xla:
        cases.append(
            xla_case(
                name + "/xla_fwd",
                lambda x, r: getattr(ops, "custom_ops_" + op)(x, r, **op_attrs),
                (x, rois),
                [inputs["features"], inputs["rois"], count],
                list(outputs.values()) + [checked],
                kind,
                dtype,
            )
        )

    grads = normal(np.random.default_rng(seed), pooled.shape, dtype)
    grad_inputs = [grads, rois]
    if functor == "RoiPool":
        grad_inputs.append(forward[1])
    grad_inputs.append(tf.shape(x))
    grad = getattr(ops, "custom_ops_" + op + "_grad")(*grad_inputs, **op_attrs)
    inputs = dict(inputs, grads=(grads, dtype))
    if functor == "RoiPool":
        inputs["argmax"] = (forward[1], "int32")
    outputs = {"grad_features": (grad, dtype)}
    cases.append(
        case(name + "/grad", functor + "Grad", attrs, inputs, outputs, "atomic", dtype)
    )
    if xla:
        features_shape = tf.shape(x)
        operands = [inputs["grads"], inputs["rois"]]
        if functor == "RoiPool":
            operands.append(inputs["argmax"])
        cases.append(
            xla_case(
                name + "/xla_grad",
                lambda *a: getattr(ops, "custom_ops_" + op + "_grad")(
                    *a, features_shape, **op_attrs
                ),
                grad_inputs[:-1],
                operands + [count],
                [outputs["grad_features"], checked],
                "atomic",
                dtype,
            )
        )
    if functor.endswith("Align") and pooled.shape.num_elements():
        # One box per block, summed in a fixed order: "sum", not "atomic".
        box_grad = getattr(ops, "custom_ops_" + op + "_grad_boxes")(
            grads=grads, features=x, rois=rois, **op_attrs
        )
        inputs = {
            "grads": (grads, dtype),
            "features": (x, dtype),
            "rois": (given, boxes_dtype),
        }
        outputs = {"grad_rois": (box_grad, boxes_dtype)}
        cases.append(
            case(
                name + "/grad_boxes",
                functor + "GradBoxes",
                attrs,
                inputs,
                outputs,
                "sum",
                dtype,
            )
        )
        if xla:
            cases.append(
                xla_case(
                    name + "/xla_grad_boxes",
                    lambda g, f, r: getattr(ops, "custom_ops_" + op + "_grad_boxes")(
                        grads=g, features=f, rois=r, **op_attrs
                    ),
                    (grads, x, rois),
                    list(inputs.values()) + [count],
                    [outputs["grad_rois"], checked],
                    "sum",
                    dtype,
                )
            )
    return cases


def _pooling_cases():
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
                        xla=i == 0 and XLA_CUSTOM_CALLS,
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
                xla=XLA_CUSTOM_CALLS,
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


# --- Boxes that fail the checks: the GPU kernels compute on the null box in
# their place (TfcoRoiCheckBoxes), and the OpKernel raises the CPU's error
# once the host has checked its copy.


def _null_invalid(rois, batch, spatial_scale):
    """`rois` with every box that the kernels reject (roi_geometry.h's RoiOk:
    a batch index out of range or fractional, a coordinate that is not
    finite or beyond 2^30 pixels once scaled) replaced by NullBox."""
    scale = np.float32(spatial_scale)
    index = rois[:, 0]
    with np.errstate(invalid="ignore"):
        ok = (
            np.all(np.isfinite(rois), axis=1)
            & np.all(np.abs(rois[:, 1:].astype(np.float64) * scale) <= 2.0**30, 1)
            & (index == np.floor(index))
            & (index >= 0)
            & (index < batch)
        )
    null = np.array([0] + [np.float32(-4) / scale] * 4, rois.dtype)
    return np.where(ok[:, None], rois, null)


def _invalid_boxes_cases():
    """Every RoI op and gradient on boxes of which some fail the checks: the
    outputs are those of the null box in their place, and the host check
    must find the box that the CPU kernel's error names (attr bad_box)."""
    rng = np.random.default_rng(12)
    rois = boxes.edge_cases(rng, 2, 9, 11, 0.5)[:6].astype(np.float32)
    rois[2] = [5, 1, 1, 8, 8]  # batch index out of range: the first error
    rois[4] = [0, np.nan, 1, 8, 8]
    nulled = _null_invalid(rois, 2, 0.5)
    cases = []
    for op, functor, variants in _ROI_OPS:
        channels = 12 if op.startswith("ps_") else 3
        features = rng.standard_normal((2, 9, 11, channels))
        try:
            getattr(ops, "custom_ops_" + op)(
                tf.constant(features, tf.float32),
                tf.constant(rois),
                pooled_height=3,
                pooled_width=2,
                spatial_scale=0.5,
            )
            raise AssertionError(f"{op} accepted invalid boxes")
        except tf.errors.InvalidArgumentError as e:
            bad_box = int(e.message.split("rois[", 1)[1].split(",", 1)[0])
        for c in _roi_cases(
            f"{op}/float32/NHWC/invalid_boxes",
            op,
            functor,
            features,
            nulled,
            (3, 2),
            variants[1],
            "float32",
            "NHWC",
            seed=12,
            xla=XLA_CUSTOM_CALLS,
            given_rois=rois,
        ):
            if not c.op.startswith("xla:"):  # the handlers raise nothing
                c.attrs["bad_box"] = bad_box
            cases.append(c)
    return cases


# --- The XLA GPU lowering's box check (TfcoRoiCheckBoxes), no op of its own.


def _check_boxes_cases():
    """Boxes that the kernels reject become the null box."""
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
        cases.append(
            case(
                f"roi_check_boxes/batch{batch}/scale{spatial_scale}/{dtype}",
                "RoiCheckBoxes",
                {"batch": batch, "spatial_scale": spatial_scale},
                {"rois": (boxes_, dtype)},
                {"checked": (_null_invalid(boxes_, batch, spatial_scale), dtype)},
                "exact",
                dtype,
            )
        )
    return cases


def cases():
    return _pooling_cases() + _invalid_boxes_cases() + _check_boxes_cases()


def check_cases(test, cases):
    """The hard inputs are there, and the GPU kernels take the boxes where
    TensorFlow puts them, in device memory (docs/gpu.md)."""
    names = [c.name for c in cases]
    for op in ("roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align"):
        for layout in ("NHWC", "NCHW"):
            test.assertIn(f"{op}/float32/{layout}/no_boxes/grad", names)
    test.assertIn("roi_align/float32/NHWC/many_boxes/fwd", names)
    invalid = [c for c in cases if "bad_box" in c.attrs]
    test.assertEqual(
        {c.op for c in invalid},
        {
            f"{kind}{suffix}"
            for kind in ("RoiPool", "RoiAlign", "PsRoiPool", "PsRoiAlign")
            for suffix in ("", "Grad")
        }
        | {"RoiAlignGradBoxes", "PsRoiAlignGradBoxes"},
    )
    test.assertTrue(all(c.attrs["bad_box"] == 2 for c in invalid))
    test.assertIn("RoiCheckBoxes", {c.op for c in cases})
    if not tfco.build_info()["cuda"]:
        return
    with_cases = {c.op for c in cases}
    checked = set()
    for op_def in load_library.op_list().op:
        name = op_def.name.split(">")[-1]
        if name not in with_cases or "rois" not in {a.name for a in op_def.input_arg}:
            continue
        for kernel in kernels.get_registered_kernels_for_op(op_def.name).kernel:
            if kernel.device_type == "GPU":
                test.assertNotIn("rois", kernel.host_memory_arg, op_def.name)
                checked.add(name)
    test.assertIn("RoiAlignGradBoxes", checked)
    test.assertIn("PsRoiPoolGrad", checked)
