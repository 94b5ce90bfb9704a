"""ClipByGlobalNorm's cases and its gradient's, over many tensors, with inf and
NaN."""

import numpy as np
import tensorflow as tf

from tools.gpu_check.cases import FLOAT_DTYPES, TF_DTYPES, case, normal, ops

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


def cases():
    cases = []
    for dtype in FLOAT_DTYPES:
        for scenario, (clip_norm, planted) in _CLIP_SCENARIOS.items():
            rng = np.random.default_rng(len(cases))
            shapes = _clip_shapes(rng, 30000 if scenario == "clipping" else 3000)
            values = [rng.standard_normal(s) * 0.05 for s in shapes]
            if planted is not None:
                values[3].flat[0] = planted
            t = [tf.cast(v, TF_DTYPES[dtype]) for v in values]
            dclipped = [normal(rng, s, dtype) for s in shapes]
            clip = tf.constant(clip_norm, TF_DTYPES[dtype])
            dglobal_norm = normal(rng, (), dtype)
            clipped, global_norm = ops.custom_ops_clip_by_global_norm(t, clip)
            dt, dclip_norm = ops.custom_ops_clip_by_global_norm_grad(
                t, clip, dclipped, dglobal_norm
            )
            inputs = {f"t{i}": (x, dtype) for i, x in enumerate(t)}
            inputs["clip_norm"] = (clip, dtype)
            name = f"clip_by_global_norm/{dtype}/{scenario}"
            outputs = {f"clipped{i}": (x, dtype) for i, x in enumerate(clipped)}
            outputs["global_norm"] = (global_norm, dtype)
            attrs = {"num_tensors": len(t)}
            cases.append(
                case(
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
                case(
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


def check_cases(test, cases):
    """A NaN among the tensors makes the global norm NaN."""
    clip_nan = [c for c in cases if c.name.endswith("/nan/fwd")]
    test.assertNotEmpty(clip_nan)
    for c in clip_nan:
        test.assertTrue(np.isnan(c.outputs["global_norm"].as_float64()).all())
