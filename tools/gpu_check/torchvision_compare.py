"""Our GPU RoI kernels against torchvision's CUDA ops, on a GPU machine with
PyTorch and torchvision and no TensorFlow (run by run_on_gpu_machine.sh).

1. Parity: every RoI case of the GPU check in float32 and float64 is run
   through torchvision.ops on CUDA, forward and backward, and compared with
   the outputs gpu_check wrote (--outputs), within the case's tolerance.
   Differences the library documents are counted, not failed: torchvision's
   ps_roi_align gives NaN for boxes with x2 < x1 (this library gives 0), and
   its ps_roi_pool backward clips bins differently from its forward (see
   tensorflow_customops/python/kernel_tests/roi/roi_torchvision_parity_test.py).
   PsRoiAlign with aligned=False has no torchvision counterpart.
2. Speed: the roi_benchmark cases (float32, 7x7 bins, sampling ratio 2,
   aligned, scale 1/16) and deform_conv2d_benchmark's case (float32, N=2,
   C=O=256, 64x64, 3x3, padding 1, with mask), forward and forward+backward,
   gpu_check --bench for ours (NHWC and NCHW) and CUDA events around
   torchvision (NCHW), medians.

    python3 torchvision_compare.py --dir DIR --out OUT [--repeats N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import case_file
import numpy as np
import torch
import torchvision
import torchvision.ops as tv_ops

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
# N, C, H=W, O, kernel size, padding; as deform_conv2d_benchmark.py.
_DCN_BENCH_CASE = (2, 256, 64, 256, 3, 1)


def _kind(op):
    return op[:-4] if op.endswith("Grad") else op


def _to_nchw(x):
    return np.ascontiguousarray(np.transpose(x, [0, 3, 1, 2]))


def _to_nhwc(x):
    return np.ascontiguousarray(np.transpose(x, [0, 2, 3, 1]))


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
        as_nchw = (lambda x: x) if nchw else _to_nchw
        as_case = (lambda x: x) if nchw else _to_nhwc
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


def _bench_cases():
    cases = []
    for name, (n, c, size, k) in _BENCH_CASES.items():
        for op in _TV_OPS:
            ps = op.startswith("Ps")
            channels = 5 * _OUT * _OUT if ps else c
            features, rois, grads = _bench_inputs(n, channels, size, k, 5 if ps else c)
            for nchw in (False, True):
                layout = _to_nchw if nchw else (lambda x: x)
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
    cases.extend(_dcn_bench_cases())
    return cases


def _dcn_bench_cases():
    n, c, size, o, k, pad = _DCN_BENCH_CASE
    rng = np.random.default_rng(0)
    nhwc = {
        "input": rng.standard_normal((n, size, size, c)),
        "offset": rng.standard_normal((n, size, size, 2 * k * k)),
        "mask": rng.uniform(size=(n, size, size, k * k)),
        "grad_output": rng.standard_normal((n, size, size, o)),
    }
    filt = rng.standard_normal((k, k, c, o)) / np.sqrt(k * k * c)
    cases = []
    for nchw in (False, True):
        layout = _to_nchw if nchw else (lambda x: x)
        inputs = {
            name: case_file.Tensor("float32", layout(x).astype(np.float32))
            for name, x in nhwc.items()
        }
        inputs["filter"] = case_file.Tensor("float32", filt.astype(np.float32))
        attrs = dict(
            n=n, h=size, w=size, c=c, o=o, kh=k, kw=k, ho=size, wo=size,
            stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, pad_top=pad,
            pad_left=pad, groups=1, offset_groups=1, nchw=int(nchw), use_mask=1,
        )  # fmt: skip
        cases.append(
            case_file.Case(
                f"default/DeformableConv2d/{'NCHW' if nchw else 'NHWC'}",
                "DeformableConv2d",
                {key: float(v) for key, v in attrs.items()},
                inputs,
            )
        )
    return cases


def _median_ms(step, repeats):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


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

    return _median_ms(forward, repeats), _median_ms(forward_backward, repeats)


def _time_torchvision_dcn(case, repeats):
    """torchvision.ops.deform_conv2d on the NCHW case: input, offset, mask and
    weight all need gradients, as in training."""

    def tensor(name, transform=lambda x: x):
        x = torch.tensor(transform(case.inputs[name].value), device="cuda")
        return x.requires_grad_(True)

    x, offset, mask = tensor("input"), tensor("offset"), tensor("mask")
    weight = tensor("filter", lambda f: np.ascontiguousarray(f.transpose(3, 2, 0, 1)))
    dy = torch.tensor(case.inputs["grad_output"].value, device="cuda")
    pad = int(case.attrs["pad_top"])

    def call():
        return tv_ops.deform_conv2d(x, offset, weight, padding=pad, mask=mask)

    def forward():
        with torch.no_grad():
            call()

    def forward_backward():
        for t in (x, offset, mask, weight):
            t.grad = None
        call().backward(dy)

    return _median_ms(forward, repeats), _median_ms(forward_backward, repeats)


def speed(directory, out, repeats):
    cases = _bench_cases()
    path = os.path.join(out, "bench_cases.bin")
    case_file.write(path, cases)
    result = subprocess.run(
        [
            os.path.join(directory, "gpu_check"),
            "--bench",
            path,
            "--repeats",
            str(repeats),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    ours = {r["case"]: r for r in map(json.loads, result.stdout.splitlines())}
    rows = []
    for case in cases:
        if case.attrs["nchw"]:
            timer = (
                _time_torchvision_dcn
                if case.op == "DeformableConv2d"
                else _time_torchvision
            )
            tv_fwd, tv_fb = timer(case, repeats)
            name = case.name.rsplit("/", 1)[0]
            nhwc, nchw = ours[name + "/NHWC"], ours[name + "/NCHW"]
            rows.append(
                dict(
                    case=name,
                    tfco_nhwc_fwd=nhwc["fwd_ms"],
                    tfco_nchw_fwd=nchw["fwd_ms"],
                    tv_fwd=tv_fwd,
                    tfco_nhwc_fwd_bwd=nhwc["fwd_bwd_ms"],
                    tfco_nchw_fwd_bwd=nchw["fwd_bwd_ms"],
                    tv_fwd_bwd=tv_fb,
                )
            )
    return rows


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--dir", required=True, help="folder with gpu_check and cases.bin"
    )
    parser.add_argument(
        "--out", required=True, help="folder with gpu_outputs.bin; results go here"
    )
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)

    print(
        f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
        f"{torch.cuda.get_device_name()}"
    )
    cases = case_file.read(os.path.join(args.dir, "cases.bin"))
    outputs = os.path.join(args.out, "gpu_outputs.bin")
    failures = 1
    if os.path.exists(outputs):
        rows, failures = parity(cases, {c.name: c for c in case_file.read(outputs)})
        print("\n".join(rows))
        print(f"torchvision parity: {len(rows) - failures} passed, {failures} failed")
    else:
        print(f"torchvision parity: not run, gpu_check wrote no {outputs}")

    table = speed(args.dir, args.out, args.repeats)
    with open(os.path.join(args.out, "speed.json"), "w") as f:
        json.dump(table, f, indent=1)
    print("\nmedian ms; ratio = torchvision / tfco NHWC (above 1: tfco faster)")
    print("| case | pass | tfco NHWC | tfco NCHW | torchvision | ratio |")
    print("|---|---|---|---|---|---|")
    for r in table:
        for p, key in (("fwd", "fwd"), ("fwd+bwd", "fwd_bwd")):
            ours_ms, tv_ms = r[f"tfco_nhwc_{key}"], r[f"tv_{key}"]
            print(
                f"| {r['case']} | {p} | {ours_ms:.3f} | {r[f'tfco_nchw_{key}']:.3f} | "
                f"{tv_ms:.3f} | {tv_ms / ours_ms:.2f}x |"
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
