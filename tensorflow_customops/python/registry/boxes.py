"""Every box [K, 5] (batch_index, x1, y1, x2, y2) the tests and tools feed to
the RoI ops, in image coordinates (multiplied by spatial_scale to reach the
feature map)."""

import math

import numpy as np
from hypothesis import strategies as st

# Fixed boxes on a [2, 4, 5, C] map at scale 1, one partly outside: the
# recorded golden GraphDefs were made with these.
GOLDEN = np.array(
    [[0, 0.5, 0.5, 3.5, 2.5], [1, 1.0, 0.0, 4.0, 4.0], [0, -1.0, 1.5, 2.0, 5.0]],
    np.float32,
)

# Fixed boxes on a [2, 4, 5, C] map at spatial_scale 0.5, away from the
# points where the RoI ops are not differentiable, for numeric Jacobians.
SMOOTH = np.array(
    [[0, 1.0, 1.5, 9.0, 7.0], [1, 0.0, 2.0, 5.5, 11.0], [0, 3.0, 0.0, 11.0, 11.0]],
    np.float32,
)

# SMOOTH per image, [N, K, 4], padded with NaN (which the ops skip), and the
# counts of its real boxes (box_counts).
SMOOTH_PER_IMAGE = np.array(
    [[SMOOTH[0, 1:], SMOOTH[2, 1:]], [SMOOTH[1, 1:], [np.nan] * 4]], np.float32
)
SMOOTH_COUNTS = np.array([2, 1], np.int32)


# SMOOTH moved by less than 1e-3, in float64 coordinates that float32 cannot
# hold (the batch indices stay whole).
SMOOTH64 = SMOOTH.astype(np.float64) + np.array([0, 1e-4, -3e-4, 7e-4, 2e-4])


def unit(count):
    """`count` boxes covering image 0 of a 2 x 2 map at scale 1."""
    return np.array([[0, 0, 0, 1, 1]] * count, np.float32).reshape(count, 5)


def uniform(rng, count, batch, height, width, dtype=np.float32):
    """`count` boxes with corners uniform over the map, on random images, as
    `dtype` (float32 or float64)."""
    corners = rng.uniform(0, [width, height, width, height], size=(count, 4))
    return np.concatenate(
        [
            rng.integers(0, batch, (count, 1)),
            np.minimum(corners[:, :2], corners[:, 2:]),
            np.maximum(corners[:, :2], corners[:, 2:]),
        ],
        1,
    ).astype(dtype)


def edge_cases(rng, batch, height, width, spatial_scale):
    """Seven boxes an image, in the layouts that break kernels: fractional,
    partly outside, tiny, degenerate, the whole map, off the map; images
    interleaved."""
    image_h, image_w = height / spatial_scale, width / spatial_scale
    boxes = []
    for n in range(batch):
        x1, y1 = rng.uniform(0, image_w / 2), rng.uniform(0, image_h / 2)
        boxes += [
            [
                n,
                x1,
                y1,
                x1 + rng.uniform(1, image_w / 2),
                y1 + rng.uniform(1, image_h / 2),
            ],
            [n, -image_w / 4, -image_h / 3, image_w / 3, image_h / 2],  # partly outside
            [n, image_w / 2, image_h / 2, image_w * 1.3, image_h * 1.2],
            [n, x1, y1, x1 + 0.3, y1 + 0.2],  # tiny
            [n, x1 + 2, y1 + 2, x1, y1],  # degenerate: x2 < x1
            [n, 0, 0, image_w, image_h],  # whole map
            [n, image_w * 3, image_h * 3, image_w * 4, image_h * 4],  # off the map
        ]
    rows = np.array(boxes, np.float32)
    return rows[rng.permutation(len(rows))]


_BAD_BATCH_INDICES = [-1.0, 0.5, 1e10, 2.0**31, math.nan, math.inf, -math.inf]
_BAD_COORDINATES = [math.nan, math.inf, -math.inf, 1e30, -1e30, 3e38]


@st.composite
def fuzzed(draw, rng, batch, height, width, scale):
    """(boxes, tags) for the fuzzer: 0 to 6 boxes around and beyond the map,
    sometimes with a batch index or a coordinate no kernel may accept
    (tagged bad_batch_index, bad_coordinates)."""
    count = draw(st.sampled_from([0, 1, 2, 3, 6]))
    scale = scale if isinstance(scale, float) and 0 < scale < math.inf else 1.0
    image_w, image_h = max(width, 1) / scale, max(height, 1) / scale
    rois = np.zeros((count, 5), np.float32)
    with np.errstate(over="ignore"):  # A tiny spatial_scale makes huge boxes.
        rois[:, 0] = rng.integers(0, max(batch, 1), count)
        rois[:, 1] = rng.uniform(-0.3 * image_w, 1.3 * image_w, count)
        rois[:, 2] = rng.uniform(-0.3 * image_h, 1.3 * image_h, count)
        rois[:, 3] = rois[:, 1] + rng.uniform(-1, image_w, count)
        rois[:, 4] = rois[:, 2] + rng.uniform(-1, image_h, count)
    tags = ()
    if count and draw(st.integers(0, 5)) == 0:
        rois[draw(st.integers(0, count - 1)), 0] = draw(
            st.sampled_from(_BAD_BATCH_INDICES + [batch])
        )
        tags += ("bad_batch_index",)
    if count and draw(st.integers(0, 5)) == 0:
        row, col = draw(st.integers(0, count - 1)), draw(st.integers(1, 4))
        rois[row, col] = draw(st.sampled_from(_BAD_COORDINATES))
        tags += ("bad_coordinates",)
    return rois, tags
