"""DeformableConv2d's cases and its gradient's."""

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tools.gpu_check.cases import (
    FLOAT_DTYPES,
    TF_DTYPES,
    case,
    normal,
    ops,
    xla_case,
)

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
    # The float and float64 filter gradient splits the pixels over blocks
    # that add their sums with atomics; on a GPU of 132 multiprocessors (an
    # H100's, an H200's, the emulation's), each block's chunk here spans
    # several steps, as on the benchmark's case.
    ("split", 1, 64, 24, 24, 64, 3, 3, 4, 1, (1, 1), (1, 1), (1, 1), True),
]
# The cases also run as the custom calls XLA compiles the ops to, through
# their CUDA handlers, where the build has them (typed FFI).
_XLA_LABELS = (
    ("plain", "groups", "nomask")
    if tfco.build_info()["xla_custom_call_api"] == "typed_ffi"
    else ()
)


def _bind(op, op_attrs):
    """The op of its tensors alone, with `op_attrs` (for tf.function)."""
    return lambda *tensors: op(*tensors, **op_attrs)


def cases():
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
                    return normal(rng, shape, "float64") * scale

                x = tf.cast(shaped(c, h, w), TF_DTYPES[dtype])
                offset = shaped(2 * og * kh * kw, ho, wo, 2.0).numpy()
                if label == "plain":
                    offset.flat[-3:] = (np.nan, np.inf, -1e30)
                offset = tf.cast(offset, TF_DTYPES[dtype])
                filt = normal(rng, (kh, kw, c // groups, o), dtype)
                mask = (
                    tf.cast(tf.sigmoid(shaped(og * kh * kw, ho, wo)), TF_DTYPES[dtype])
                    if masked
                    else tf.zeros([0], TF_DTYPES[dtype])
                )
                dy = normal(
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
                y = ops.custom_ops_deformable_conv2d(x, filt, offset, mask, **op_attrs)
                name = f"deformable_conv2d/{dtype}/{data_format}/{label}"
                cases.append(
                    case(
                        f"{name}/fwd", "DeformableConv2d", attrs, inputs,
                        {"output": (y, dtype)}, "sum", dtype,
                    )
                )  # fmt: skip
                if label in _XLA_LABELS:
                    cases.append(
                        xla_case(
                            f"{name}/xla_fwd",
                            _bind(ops.custom_ops_deformable_conv2d, op_attrs),
                            (x, filt, offset, mask),
                            list(inputs.values()),
                            [(y, dtype)],
                            "sum",
                            dtype,
                        )
                    )
                grads = ops.custom_ops_deformable_conv2d_grad(
                    x, filt, offset, mask, dy, **op_attrs
                )
                outputs = dict(
                    zip(
                        ("grad_input", "grad_filter", "grad_offset", "grad_mask"),
                        ((g, dtype) for g in grads),
                    )
                )
                if label in _XLA_LABELS:
                    # Every gradient is a result, grad_mask [0] without a mask.
                    cases.append(
                        xla_case(
                            f"{name}/xla_grad",
                            _bind(ops.custom_ops_deformable_conv2d_grad, op_attrs),
                            (x, filt, offset, mask, dy),
                            list(inputs.values()) + [(dy, dtype)],
                            list(outputs.values()),
                            "atomic",
                            dtype,
                        )
                    )
                if not masked:
                    del outputs["grad_mask"]
                cases.append(
                    case(
                        f"{name}/grad", "DeformableConv2dGrad", attrs,
                        dict(inputs, grad_output=(dy, dtype)), outputs, "atomic",
                        dtype,
                    )
                )  # fmt: skip
    return cases
