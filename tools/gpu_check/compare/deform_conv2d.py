"""DeformableConv2d's GPU kernels against torchvision.ops.deform_conv2d on
CUDA (compare/, run on the GPU machine by compare_on_gpu.py).

Speed: deform_conv2d_benchmark's case (float32, N=2, C=O=256, 64x64, 3x3,
padding 1, with mask), forward and forward+backward, gpu_check --bench for
ours (NHWC and NCHW) and CUDA events around torchvision (NCHW), medians.
"""

import case_file
import numpy as np
import torch
import torchvision.ops as tv_ops
from compare import layout_rows, median_ms, to_nchw

OTHER = "torchvision"

# N, C, H=W, O, kernel size, padding; as deform_conv2d_benchmark.py.
_BENCH_CASE = (2, 256, 64, 256, 3, 1)


def bench_cases():
    n, c, size, o, k, pad = _BENCH_CASE
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
        layout = to_nchw if nchw else (lambda x: x)
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


def _time_torchvision(case, repeats):
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

    return median_ms(forward, repeats), median_ms(forward_backward, repeats)


def speed(ours, repeats):
    return layout_rows(bench_cases(), ours, _time_torchvision, repeats)
