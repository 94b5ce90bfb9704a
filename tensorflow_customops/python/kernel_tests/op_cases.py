"""Valid inputs for every registered op, shared by the determinism and
concurrency tests.

A case is a function of some inputs that runs one or more of the library's
ops; `evaluate` adds the gradients, so a forward case also runs its *Grad op.
Which ops a case runs is read from its traced graph, not declared, so the
tests that use these cases can name every registered op that no case reaches:
a new op fails them until it gets one.

Inputs are large enough that every CPU kernel splits its work across 4
intra-op threads (see the Shard/parallelFor cost arguments in
core/kernels/*.cc): at least ~10^6 estimated cycles per op, where Eigen's
cost model starts a thread per ~10^5.
"""

import dataclasses
from typing import Callable

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import load_library

_ops = load_library.load_op_library()

FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    # seed -> list of NumPy inputs; different seeds give different values.
    make_inputs: Callable[[int], list]
    # (*tensors) -> a tensor or a list of tensors.
    forward: Callable
    # Indices of the inputs to differentiate with respect to.
    differentiable: tuple = ()


def _rng(seed):
    return np.random.default_rng(seed)


def _normal(rng, shape, dtype):
    """Random normal values already rounded to `dtype`, as NumPy (bfloat16
    travels as float32 and is cast by `forward`)."""
    values = tf.cast(rng.standard_normal(shape), dtype)
    return tf.cast(values, tf.float32 if dtype == tf.bfloat16 else dtype).numpy()


def _as(dtype):
    return lambda x: tf.cast(x, dtype)


# --- ZeroOut: parallelFor over elements, 3 cycles each.


def _zero_out_case(dtype):
    cast = _as(dtype)
    return Case(
        f"zero_out_{dtype.name}",
        lambda seed: [_normal(_rng(seed), (1024, 1031), dtype)],
        lambda x: tfco.zero_out(cast(x), keep=300_000),
        (0,),
    )


# --- MatrixMul: Eigen's thread-pool contraction.


def _matrix_mul_case(transpose_a, transpose_b, dtype=tf.float32, m=128, k=4096, n=96):
    """Eigen's blocking splits the inner dimension only when it is long, and
    shards over it when m and n are small: both change the order of the
    sums, so k is long here."""
    cast = _as(dtype)

    def make(seed):
        rng = _rng(seed)
        a = _normal(rng, (k, m) if transpose_a else (m, k), dtype)
        b = _normal(rng, (n, k) if transpose_b else (k, n), dtype)
        return [a, b]

    suffix = ("t" if transpose_a else "n") + ("t" if transpose_b else "n")
    return Case(
        f"matrix_mul_{suffix}_{m}x{k}x{n}_{dtype.name}",
        make,
        lambda a, b: tfco.matrix_mul(
            cast(a), cast(b), transpose_a=transpose_a, transpose_b=transpose_b
        ),
        (0, 1),
    )


# --- ClipByGlobalNorm(+Grad): parallel over chunks of 2^14 elements of the
# tensors taken as one sequence; 20 tensors of up to 60000 elements give about
# 40 chunks.

_CLIP_SIZES = [int(s) for s in _rng(3).integers(1, 60_000, size=20)]


def _clip_inputs(seed, dtype):
    rng = _rng(seed)
    tensors = [_normal(rng, (size,), dtype) for size in _CLIP_SIZES]
    return tensors + [np.array(20.0, tensors[0].dtype)]


def _clip_case(dtype):
    cast = _as(dtype)

    def forward(*args):
        clipped, norm = tfco.clip_by_global_norm(
            [cast(t) for t in args[:-1]], cast(args[-1])
        )
        return clipped + [norm]

    return Case(
        f"clip_by_global_norm_{dtype.name}",
        lambda seed: _clip_inputs(seed, dtype),
        forward,
        tuple(range(len(_CLIP_SIZES) + 1)),
    )


def _clip_grad_case(dtype):
    count = len(_CLIP_SIZES)
    cast = _as(dtype)

    def make(seed):
        rng = _rng(seed)
        dclipped = [_normal(rng, (size,), dtype) for size in _CLIP_SIZES]
        return _clip_inputs(seed, dtype) + dclipped + [dclipped[0][:1].reshape(())]

    def forward(*args):
        args = [cast(x) for x in args]
        dt, dclip_norm = _ops.custom_ops_clip_by_global_norm_grad(
            t=args[:count],
            clip_norm=args[count],
            dclipped=args[count + 1 : 2 * count + 1],
            dglobal_norm=args[-1],
        )
        return list(dt) + [dclip_norm]

    return Case(f"clip_by_global_norm_grad_{dtype.name}", make, forward)


# --- CheckNumericsN: parallelFor over the elements of each tensor, mixed
# dtypes; the gradient passes through.


def _check_numerics_case():
    dtypes = FLOAT_DTYPES

    def make(seed):
        rng = _rng(seed)
        return [_normal(rng, (600, 1000), dtype) for dtype in dtypes]

    return Case(
        "check_numerics_n_mixed",
        make,
        lambda *xs: tfco.check_numerics_n(
            [tf.cast(x, d) for x, d in zip(xs, dtypes)], "op_cases"
        ),
        tuple(range(len(dtypes))),
    )


# --- RoI ops: forward parallel over output bins (1200 rois x 16 bins), backward
# over (image, channel block) pairs (2 images x 8 blocks).

_ROI_OUTPUT_SIZE = 4


def _roi_inputs(seed, dtype, data_format="NHWC"):
    rng = _rng(seed)
    features = _normal(rng, (2, 40, 40, 64), dtype)
    if data_format == "NCHW":
        features = np.ascontiguousarray(np.transpose(features, [0, 3, 1, 2]))
    corners = rng.uniform(0, 40, size=(300, 4))
    rois = np.concatenate(
        [
            rng.integers(0, 2, (300, 1)),
            np.minimum(corners[:, :2], corners[:, 2:]),
            np.maximum(corners[:, :2], corners[:, 2:]),
        ],
        1,
    ).astype(np.float32)
    return [features, rois]


_ROI_ATTRS = {
    "roi_pool": {},
    "roi_align": {"sampling_ratio": 2, "aligned": True},
    "ps_roi_pool": {},
    "ps_roi_align": {"sampling_ratio": -1, "aligned": False},
}


def _roi_case(op, dtype=tf.float32, data_format="NHWC"):
    cast = _as(dtype)
    attrs = dict(_ROI_ATTRS[op], data_format=data_format)
    return Case(
        f"{op}_{dtype.name}_{data_format}",
        lambda seed: _roi_inputs(seed, dtype, data_format),
        lambda features, rois: getattr(tfco, op)(
            cast(features), rois, _ROI_OUTPUT_SIZE, **attrs
        ),
        (0,),
    )


def _raw_roi_attrs(op):
    """The raw ops' spelling of _ROI_ATTRS[op]."""
    return dict(
        _ROI_ATTRS[op],
        pooled_height=_ROI_OUTPUT_SIZE,
        pooled_width=_ROI_OUTPUT_SIZE,
    )


def _roi_grad_case(op):
    """The gradient op called directly, with a random incoming gradient."""
    forward_op = getattr(_ops, f"custom_ops_{op}")
    grad_op = getattr(_ops, f"custom_ops_{op}_grad")
    attrs = _raw_roi_attrs(op)
    channels = 64 // _ROI_OUTPUT_SIZE**2 if op.startswith("ps_") else 64
    pooled_shape = (300, _ROI_OUTPUT_SIZE, _ROI_OUTPUT_SIZE, channels)

    def make(seed):
        features, rois = _roi_inputs(seed, tf.float32)
        return [features, rois, _normal(_rng(seed + 1), pooled_shape, tf.float32)]

    def forward(features, rois, grads):
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

    return Case(f"{op}_grad_float32", make, forward)


def all_cases():
    """Every case: each op's forward with its gradient, each *Grad op called
    directly, in every float dtype where that is cheap. One float32 case per
    op comes first (see covering_cases)."""
    cases = [
        _zero_out_case(tf.float32),
        _matrix_mul_case(False, False),
        _clip_case(tf.float32),
        _check_numerics_case(),
    ]
    cases += [_roi_case(op) for op in _ROI_ATTRS]
    # Variants: transposes, dtypes, layouts, and the *Grad ops called directly.
    cases += [_zero_out_case(tf.float16)]
    transposes = ((False, True), (True, False), (True, True))
    cases += [_matrix_mul_case(ta, tb) for ta, tb in transposes]
    cases += [
        _matrix_mul_case(False, False, m=16, k=131072, n=16),
        _matrix_mul_case(False, False, tf.bfloat16, k=1024),
    ]
    cases += [_clip_case(dtype) for dtype in FLOAT_DTYPES if dtype != tf.float32]
    cases += [_clip_grad_case(dtype) for dtype in (tf.float32, tf.float16)]
    cases += [
        _roi_case("roi_align", dtype) for dtype in FLOAT_DTYPES if dtype != tf.float32
    ]
    cases += [_roi_case("ps_roi_pool", tf.float16), _roi_case("roi_pool", tf.bfloat16)]
    cases += [_roi_case(op, data_format="NCHW") for op in ("roi_align", "ps_roi_pool")]
    cases += [_roi_grad_case(op) for op in _ROI_ATTRS]
    return cases


def _upstream(y):
    """A fixed, varied incoming gradient for output y."""
    pattern = tf.reshape(tf.range(tf.size(y)) % 7 - 3, tf.shape(y))
    return tf.cast(pattern, y.dtype)


def evaluate(case, inputs):
    """The case's outputs followed by its gradients with respect to its
    differentiable inputs, as a flat list of tensors."""
    xs = [tf.convert_to_tensor(x) for x in inputs]
    watched = [xs[i] for i in case.differentiable]
    with tf.GradientTape() as tape:
        tape.watch(watched)
        ys = tf.nest.flatten(case.forward(*xs))
    if not watched:
        return ys
    grads = tape.gradient(ys, watched, output_gradients=[_upstream(y) for y in ys])
    return ys + grads


def ops_run_by(case):
    """The registered ops (CustomOps>...) that evaluating `case` runs."""
    graph = (
        tf.function(lambda *xs: evaluate(case, xs))
        .get_concrete_function(*case.make_inputs(0))
        .graph
    )
    return {
        op.type for op in graph.get_operations() if op.type.startswith("CustomOps>")
    }


def registered_ops():
    return {op.name for op in load_library.op_list().op}


def covering_cases(cases):
    """The cases, in order, that each run a registered op no earlier one runs,
    until every registered op is run; and the registered ops none of `cases`
    runs, sorted."""
    needed = registered_ops()
    chosen = []
    for case in cases:
        if not needed:
            break
        ops = ops_run_by(case)
        if ops & needed:
            chosen.append(case)
            needed -= ops
    return chosen, sorted(needed)
