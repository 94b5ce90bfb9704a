"""Naive NumPy references of the RoI ops, for tests only.

Written from the definitions (torchvision.ops' documented behaviour), one
output element at a time, in float64 and NCHW, so that they share no code and
no loop structure with the kernels.
"""

import math

import numpy as np


def _round_half_away(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def bilinear(channel_map, y, x):
    """Value of a [H, W] map at (y, x); 0 more than one pixel outside."""
    height, width = channel_map.shape
    if y < -1.0 or y > height or x < -1.0 or x > width or height == 0 or width == 0:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(math.floor(y)), int(math.floor(x))
    if y0 >= height - 1:
        y0 = y1 = height - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= width - 1:
        x0 = x1 = width - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return (
        (1 - ly) * (1 - lx) * channel_map[y0, x0]
        + (1 - ly) * lx * channel_map[y0, x1]
        + ly * (1 - lx) * channel_map[y1, x0]
        + ly * lx * channel_map[y1, x1]
    )


def _align_value(channel_map, box, i, j, output_size, sampling_ratio):
    """Average of the bilinear samples of bin (i, j) of `box`."""
    y_start, x_start, box_h, box_w = box
    pooled_h, pooled_w = output_size
    bin_h, bin_w = box_h / pooled_h, box_w / pooled_w
    grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(box_h / pooled_h)
    grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(box_w / pooled_w)
    total = 0.0
    for iy in range(grid_h):
        y = y_start + i * bin_h + (iy + 0.5) * bin_h / grid_h
        for ix in range(grid_w):
            x = x_start + j * bin_w + (ix + 0.5) * bin_w / grid_w
            total += bilinear(channel_map, y, x)
    return total / max(grid_h * grid_w, 1)


def _align_box(roi, spatial_scale, offset, min_size_one):
    x1, y1, x2, y2 = (float(v) * spatial_scale - offset for v in roi[1:])
    box_h, box_w = y2 - y1, x2 - x1
    if min_size_one:
        box_h, box_w = max(box_h, 1.0), max(box_w, 1.0)
    return y1, x1, box_h, box_w


def roi_align(features, rois, output_size, spatial_scale, sampling_ratio, aligned):
    """features [N, C, H, W] -> [K, C, PH, PW]."""
    features = np.asarray(features, np.float64)
    pooled_h, pooled_w = output_size
    out = np.zeros((len(rois), features.shape[1], pooled_h, pooled_w))
    for k, roi in enumerate(rois):
        image = features[int(roi[0])]
        box = _align_box(
            roi, spatial_scale, 0.5 if aligned else 0.0, min_size_one=not aligned
        )
        for c in range(features.shape[1]):
            for i in range(pooled_h):
                for j in range(pooled_w):
                    out[k, c, i, j] = _align_value(
                        image[c], box, i, j, output_size, sampling_ratio
                    )
    return out


def ps_roi_align(
    features, rois, output_size, spatial_scale, sampling_ratio, aligned=True
):
    """features [N, C * PH * PW, H, W] -> [K, C, PH, PW]."""
    features = np.asarray(features, np.float64)
    pooled_h, pooled_w = output_size
    out_channels = features.shape[1] // (pooled_h * pooled_w)
    out = np.zeros((len(rois), out_channels, pooled_h, pooled_w))
    for k, roi in enumerate(rois):
        image = features[int(roi[0])]
        box = _align_box(
            roi, spatial_scale, 0.5 if aligned else 0.0, min_size_one=False
        )
        for c in range(out_channels):
            for i in range(pooled_h):
                for j in range(pooled_w):
                    group = (c * pooled_h + i) * pooled_w + j
                    out[k, c, i, j] = _align_value(
                        image[group], box, i, j, output_size, sampling_ratio
                    )
    return out


def _pixel_bins(roi, spatial_scale, output_size, size_hw, position_sensitive):
    """[(h_start, h_end)] and [(w_start, w_end)] of each bin, clipped."""
    x1, y1, x2, y2 = (_round_half_away(float(v) * spatial_scale) for v in roi[1:])
    extra = 0 if position_sensitive else 1
    result = []
    for start, end, bins, size in (
        (y1, y2, output_size[0], size_hw[0]),
        (x1, x2, output_size[1], size_hw[1]),
    ):
        extent = max(end - start + extra, 1)
        limit = size - 1 if position_sensitive else size
        ranges = []
        bin_size = extent / bins
        for b in range(bins):
            lo = math.floor(b * bin_size) + start
            hi = math.ceil((b + 1) * bin_size) + start
            ranges.append((min(max(lo, 0), limit), min(max(hi, 0), limit)))
        result.append(ranges)
    return result


def roi_pool(features, rois, output_size, spatial_scale):
    """features [N, C, H, W] -> (pooled, argmax) [K, C, PH, PW]."""
    features = np.asarray(features, np.float64)
    _, channels, height, width = features.shape
    shape = (len(rois), channels, *output_size)
    pooled, argmax = np.zeros(shape), -np.ones(shape, np.int32)
    for k, roi in enumerate(rois):
        image = features[int(roi[0])]
        h_bins, w_bins = _pixel_bins(
            roi, spatial_scale, output_size, (height, width), False
        )
        for i, (h0, h1) in enumerate(h_bins):
            for j, (w0, w1) in enumerate(w_bins):
                if h1 <= h0 or w1 <= w0:
                    continue
                for c in range(channels):
                    region = image[c, h0:h1, w0:w1]
                    flat = int(np.argmax(region))  # first maximum, row-major
                    pooled[k, c, i, j] = region.flat[flat]
                    ry, rx = divmod(flat, w1 - w0)
                    argmax[k, c, i, j] = (h0 + ry) * width + (w0 + rx)
    return pooled, argmax


def ps_roi_pool(features, rois, output_size, spatial_scale):
    """features [N, C * PH * PW, H, W] -> [K, C, PH, PW]."""
    features = np.asarray(features, np.float64)
    _, channels, height, width = features.shape
    pooled_h, pooled_w = output_size
    out_channels = channels // (pooled_h * pooled_w)
    out = np.zeros((len(rois), out_channels, pooled_h, pooled_w))
    for k, roi in enumerate(rois):
        image = features[int(roi[0])]
        h_bins, w_bins = _pixel_bins(
            roi, spatial_scale, output_size, (height, width), True
        )
        for i, (h0, h1) in enumerate(h_bins):
            for j, (w0, w1) in enumerate(w_bins):
                if h1 <= h0 or w1 <= w0:
                    continue
                for c in range(out_channels):
                    group = (c * pooled_h + i) * pooled_w + j
                    out[k, c, i, j] = image[group, h0:h1, w0:w1].mean()
    return out
