"""Comparisons of the GPU kernels with another library's CUDA ops, on the GPU
machine (compare_on_gpu.py runs them; run_on_gpu_machine.sh carries this
folder there): one module per op family that has one, `<family>.py`, found by
itself. A module may import what the GPU machine may lack (PyTorch, say):
compare_on_gpu.py skips a module that fails to import, and says why. It has

  OTHER                  the other library's name, for the tables;
  parity(cases, ours)    optional: the lines of a table comparing the cases
                         of cases.bin with the other library, and the number
                         of failures; `ours` maps case names to the cases of
                         outputs gpu_check wrote (--outputs);
  bench_cases()          optional: cases to time, which gpu_check --bench
                         runs (their runners must have a benchmark);
  speed(ours, repeats)   with bench_cases: rows of the speed table (dicts,
                         layout_rows); `ours` maps case names to
                         gpu_check --bench's JSON objects.

What they share is below: CUDA-event timing (PyTorch) and the layouts.
"""

import statistics

import numpy as np


def to_nchw(x):
    return np.ascontiguousarray(np.transpose(x, [0, 3, 1, 2]))


def to_nhwc(x):
    return np.ascontiguousarray(np.transpose(x, [0, 2, 3, 1]))


def median_ms(step, repeats):
    """The median milliseconds of `step` on PyTorch's current CUDA stream,
    after 3 warm-up calls, timed with CUDA events."""
    import torch  # only the modules that time PyTorch need it

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


def layout_rows(cases, ours, time_other, repeats):
    """Speed rows of `cases`, pairs of a case in both layouts (names ending
    "/NHWC" and "/NCHW"): milliseconds forward (`*_fwd`) and forward+backward
    (`*_fwd_bwd`), ours (`tfco_nhwc_*`, `tfco_nchw_*`) from gpu_check
    --bench, the other library's (`other_*`) on the NCHW case from
    time_other(case, repeats) -> (fwd_ms, fwd_bwd_ms)."""
    rows = []
    for case in cases:
        if not case.name.endswith("/NCHW"):
            continue
        other_fwd, other_fwd_bwd = time_other(case, repeats)
        name = case.name.rsplit("/", 1)[0]
        nhwc, nchw = ours[name + "/NHWC"], ours[name + "/NCHW"]
        rows.append(
            dict(
                case=name,
                tfco_nhwc_fwd=nhwc["fwd_ms"],
                tfco_nchw_fwd=nchw["fwd_ms"],
                other_fwd=other_fwd,
                tfco_nhwc_fwd_bwd=nhwc["fwd_bwd_ms"],
                tfco_nchw_fwd_bwd=nchw["fwd_bwd_ms"],
                other_fwd_bwd=other_fwd_bwd,
            )
        )
    return rows
