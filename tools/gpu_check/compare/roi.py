"""The RoI family's GPU kernels against torchvision's CUDA ops (compare/,
run on the GPU machine by compare_on_gpu.py).

1. Parity: every RoI case of the GPU check in float32 and float64 is run
   through torchvision.ops on CUDA, forward and backward, and compared with
   the outputs gpu_check wrote, within the case's tolerance. Differences the
   library documents are counted, not failed: torchvision's ps_roi_align
   gives NaN for boxes with x2 < x1 (this library gives 0), and its
   ps_roi_pool backward clips bins differently from its forward (see
   tensorflow_customops/python/kernel_tests/roi/roi_torchvision_parity_test.py).
   PsRoiAlign with aligned=False has no torchvision counterpart.
2. Speed: the roi_benchmark cases (float32, 7x7 bins, sampling ratio 2,
   aligned, scale 1/16), forward and forward+backward, gpu_check --bench for
   ours (NHWC and NCHW) and CUDA events around torchvision (NCHW), medians.
"""

import case_file
import numpy as np
import torch
import torchvision.ops as tv_ops
from compare import layout_rows, median_ms, to_nchw, to_nhwc

OTHER = "torchvision"

_TV_OPS = {
    "RoiAlign": "roi_align",
    "RoiPool": "roi_pool",
    "PsRoiAlign": "ps_roi_align",
    "PsRoiPool": "ps_roi_pool",
}
_TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}

# name: (N, C, H=W, K); as roi_benchmark.py. PS ops use 5 * 7 * 7 channels.
_BENCH_CASES = {"default": (2, 256, 64, 512), "large": (4, 256, 96, 1024)}
_OUT = 7
_SCALE = 1.0 / 16


def _kind(op):
    return op[:-4] if op.endswith("Grad") else op


def _tv_call(kind, features, rois, attrs):
    kwargs = dict(
        output_size=(int(attrs["pooled_height"]), int(attrs["pooled_width"])),
        spatial_scale=attrs["spatial_scale"],
    )
    if kind in ("RoiAlign", "PsRoiAlign"):
        kwargs["sampling_ratio"] = int(attrs["sampling_ratio"])
    if kind == "RoiAlign":
        kwargs["aligned"] = bool(attrs["aligned"])
    out = getattr(tv_ops, _TV_OPS[kind])(features, rois, **kwargs)
    return out


def _degenerate(rois):
    return (rois[:, 3] < rois[:, 1]) | (rois[:, 4] < rois[:, 2])


def parity(cases, ours):
    """Lines of the parity table, and the number of failures."""
    rows, failures = [], 0
    for case in cases:
        kind = _kind(case.op)
        dtype = case.inputs.get("features", case_file.Tensor("", None)).dtype
        if kind not in _TV_OPS or dtype not in _TORCH_DTYPES:
            continue
        if kind == "PsRoiAlign" and not case.attrs["aligned"]:
            continue
        if "bad_box" in case.attrs:  # boxes torchvision would index out of bounds
            continue
        nchw = bool(case.attrs["nchw"])
        as_nchw = (lambda x: x) if nchw else to_nchw
        as_case = (lambda x: x) if nchw else to_nhwc
        features = torch.tensor(
            as_nchw(case.inputs["features"].value),
            device="cuda",
            requires_grad=case.op.endswith("Grad"),
        )
        rois = torch.tensor(
            case.inputs["rois"].value, device="cuda", dtype=features.dtype
        )
        out = _tv_call(kind, features, rois, case.attrs)
        if case.op.endswith("Grad"):
            grads = torch.tensor(as_nchw(case.inputs["grads"].value), device="cuda")
            out.backward(grads)
            theirs = as_case(features.grad.cpu().numpy())
            key = "grad_features"
        else:
            theirs = as_case(out.detach().cpu().numpy())
            key = "pooled"
        if case.name not in ours:
            rows.append(f"FAIL {case.name}: gpu_check wrote no output")
            failures += 1
            continue
        mine = ours[case.name].outputs[key].as_float64()
        known = np.zeros(mine.shape, bool)
        note = ""
        if kind == "PsRoiAlign" and not case.op.endswith("Grad"):
            degenerate = _degenerate(case.inputs["rois"].value)
            known[degenerate] = True
            nans = int(np.isnan(theirs).sum())
            note = f" ({nans} NaN from torchvision on boxes with x2 < x1)"
        if kind == "PsRoiPool" and case.op.endswith("Grad"):
            known[:] = True
            note = (
                " (torchvision's backward clips bins unlike its forward: not compared)"
            )
        diff = np.abs(mine - theirs)[~known]
        bound = case.attrs["atol"] + case.attrs["rtol"] * np.abs(theirs)[~known]
        ok = bool(np.all(diff <= bound)) and not np.isnan(diff).any()
        worst = float(diff.max()) if diff.size else 0.0
        failures += not ok
        verdict = "PASS" if ok else "FAIL"
        rows.append(
            f"{verdict} {case.name} vs torchvision: max |diff| {worst:.3g}{note}"
        )
    return rows, failures


def _bench_inputs(n, c, size, k, out_channels, seed=0):
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, size, size, c)).astype(np.float32)
    corners = np.sort(rng.uniform(0, size / _SCALE, size=(k, 2, 2)), axis=1)
    rois = np.concatenate(
        [rng.integers(0, n, size=(k, 1)), corners[:, 0, :], corners[:, 1, :]], axis=1
    ).astype(np.float32)
    grads = rng.standard_normal((k, _OUT, _OUT, out_channels)).astype(np.float32)
    return features, rois, grads


def bench_cases():
    cases = []
    for name, (n, c, size, k) in _BENCH_CASES.items():
        for op in _TV_OPS:
            ps = op.startswith("Ps")
            channels = 5 * _OUT * _OUT if ps else c
            features, rois, grads = _bench_inputs(n, channels, size, k, 5 if ps else c)
            for nchw in (False, True):
                layout = to_nchw if nchw else (lambda x: x)
                attrs = {
                    "pooled_height": _OUT,
                    "pooled_width": _OUT,
                    "spatial_scale": _SCALE,
                    "sampling_ratio": 2,
                    "aligned": 1,
                    "nchw": float(nchw),
                }
                t = lambda x, dtype="float32": case_file.Tensor(dtype, x)  # noqa: E731
                cases.append(
                    case_file.Case(
                        f"{name}/{op}/{'NCHW' if nchw else 'NHWC'}",
                        op,
                        attrs,
                        {
                            "features": t(layout(features)),
                            "rois": t(rois),
                            "grads": t(layout(grads)),
                        },
                    )
                )
    return cases


def _time_torchvision(case, repeats):
    features = torch.tensor(case.inputs["features"].value, device="cuda")
    rois = torch.tensor(case.inputs["rois"].value, device="cuda")
    grads = torch.tensor(case.inputs["grads"].value, device="cuda")
    features.requires_grad_(True)

    def forward():
        with torch.no_grad():
            _tv_call(case.op, features, rois, case.attrs)

    def forward_backward():
        features.grad = None
        _tv_call(case.op, features, rois, case.attrs).backward(grads)

    return median_ms(forward, repeats), median_ms(forward_backward, repeats)


def speed(ours, repeats):
    return layout_rows(bench_cases(), ours, _time_torchvision, repeats)
