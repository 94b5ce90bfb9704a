"""A NumPy reference of deformable convolution v2 in float64, written from
the semantics (REFERENCE.md section 15), for the tests; and the random cases
the tests and the torchvision parity test share."""

import dataclasses

import numpy as np


def bilinear(image, y, x):
    """image [N, H, W, C] sampled at y, x [N, P]: [N, P, C]; 0 unless
    -1 < y < H and -1 < x < W, corners outside the map count as 0."""
    n, h, w, _ = image.shape
    inside = (y > -1) & (y < h) & (x > -1) & (x < w)
    y = np.where(inside, y, 0.0)
    x = np.where(inside, x, 0.0)
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    ly, lx = y - y0, x - x0
    batch = np.arange(n)[:, None]
    total = 0.0
    for dy, wy in ((0, 1 - ly), (1, ly)):
        for dx, wx in ((0, 1 - lx), (1, lx)):
            yy, xx = y0 + dy, x0 + dx
            valid = inside & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            values = image[batch, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
            total = total + np.where(valid, wy * wx, 0.0)[..., None] * values
    return total


@dataclasses.dataclass
class Case:
    """NHWC arrays and the geometry of one call."""

    input: np.ndarray  # [N, H, W, C]
    offset: np.ndarray  # [N, Ho, Wo, 2 G kh kw]
    filter: np.ndarray  # [kh, kw, C / groups, O]
    mask: object  # [N, Ho, Wo, G kh kw] or None
    strides: tuple
    padding: tuple  # (top, bottom, left, right)
    dilations: tuple

    def kwargs(self):
        top, bottom, left, right = self.padding
        return dict(
            strides=self.strides,
            padding=((top, bottom), (left, right)),
            dilations=self.dilations,
        )


def output_size(size, k, stride, before, after, dilation):
    return (size + before + after - (dilation * (k - 1) + 1)) // stride + 1


def make_case(
    seed,
    n=2,
    c=4,
    h=5,
    w=6,
    o=6,
    kernel=(3, 2),
    groups=2,
    offset_groups=2,
    strides=(2, 1),
    padding=(1, 0, 2, 1),
    dilations=(1, 2),
    mask=True,
    offset_scale=2.0,
):
    rng = np.random.default_rng(seed)
    kh, kw = kernel
    ho = output_size(h, kh, strides[0], padding[0], padding[1], dilations[0])
    wo = output_size(w, kw, strides[1], padding[2], padding[3], dilations[1])
    taps = offset_groups * kh * kw
    return Case(
        input=rng.normal(size=(n, h, w, c)),
        offset=rng.normal(size=(n, ho, wo, 2 * taps)) * offset_scale,
        filter=rng.normal(size=(kh, kw, c // groups, o)),
        mask=rng.uniform(size=(n, ho, wo, taps)) if mask else None,
        strides=strides,
        padding=padding,
        dilations=dilations,
    )


def forward(case):
    """The output [N, Ho, Wo, O] of `case`, in float64."""
    x, offset, filt = case.input, case.offset, case.filter
    n, h, w, c = x.shape
    kh, kw, c_in, o = filt.shape
    groups = c // c_in
    _, ho, wo, channels = offset.shape
    offset_groups = channels // (2 * kh * kw)
    cog = c // offset_groups
    rows = np.arange(ho)[:, None] * case.strides[0] - case.padding[0]
    cols = np.arange(wo)[None, :] * case.strides[1] - case.padding[2]
    columns = np.zeros((n, ho * wo, kh, kw, c))
    for i in range(kh):
        for j in range(kw):
            for g in range(offset_groups):
                tap = (g * kh + i) * kw + j
                dy = offset[..., 2 * tap].reshape(n, -1)
                dx = offset[..., 2 * tap + 1].reshape(n, -1)
                ys = (rows + i * case.dilations[0] + 0 * cols).reshape(1, -1) + dy
                xs = (cols + j * case.dilations[1] + 0 * rows).reshape(1, -1) + dx
                values = bilinear(x[..., g * cog : (g + 1) * cog], ys, xs)
                if case.mask is not None:
                    values = values * case.mask[..., tap].reshape(n, -1, 1)
                columns[:, :, i, j, g * cog : (g + 1) * cog] = values
    og = o // groups
    out = np.concatenate(
        [
            np.einsum(
                "npijc,ijco->npo",
                columns[..., g * c_in : (g + 1) * c_in],
                filt[..., g * og : (g + 1) * og],
            )
            for g in range(groups)
        ],
        axis=-1,
    )
    return out.reshape(n, ho, wo, o)
