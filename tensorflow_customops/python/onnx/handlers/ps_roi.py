"""ONNX handlers of the position-sensitive RoI ops, which have no ONNX op.

Both become one ONNX RoiAlign with a 1x1 output over "sub-boxes", one per
(box, bin): the feature map's channel groups move into the batch axis
([N, C, H, W] -> [N * bins, C / bins, H, W], group b of image n at batch
index n * bins + b), so each sub-box pools only its bin's group, over its
bin's extent. That is one bin's work per output value, as in the kernels. The
sub-boxes go bin by bin (all boxes' bin 0 first), so that RoiAlign reads one
channel group for many boxes in turn, while it is in cache. The
sub-box geometry is computed in the graph with the kernels' arithmetic
(roi_geometry.h):

- PsRoiPool: the integer bins (coordinates rounded half away from zero, which
  ONNX's Round, half to even, is not; bins clipped to [0, size - 1]) as boxes
  [lo - 0.5, hi - 0.5] in half_pixel mode with an adaptive grid: RoiAlign then
  samples pixel centres lo, lo + 1, ..., hi - 1 with weights exactly 1 and 0,
  sums them in the kernel's order and divides by the area. Exact.
- PsRoiAlign: each bin's start and size, with the adaptive grid ceil(bin
  size) that RoiAlign recomputes from the sub-box. RoiAlign's half_pixel
  offset puts the sub-box's edges a float rounding away from the kernel's (no
  float sub-box reproduces an arbitrary bin start and size exactly), so sample
  positions differ by a few units in the last place of the coordinates, and
  the outputs by as much times the features' slope. Two places are not
  continuous and are made exact: the adaptive grid (the sub-box is nudged
  where rounding would change it), and the map's drop edges (samples beyond
  -1 or the map's size count as 0): a sub-box with a sample within rounding
  of them is recomputed by RoiAlign over its whole box, whose geometry is the
  kernel's, keeping its bin (rare; a box's bins of work each), unless the
  kernel's adaptive grid gives the bin no samples along an axis (a reversed
  box), which pools it to 0 as the sub-box does. With
  aligned=False that takes output_half_pixel mode for boxes of a pixel or
  more, and half_pixel with coordinates shifted by 0.5 where the shift is
  exact; a box that is neither (under a pixel, with coordinates too fine for
  the shift) keeps its sub-box result.
"""

import numpy as np
from onnx import TensorProto
from tf2onnx import utils
from tf2onnx.graph_builder import GraphBuilder

from tensorflow_customops.python.onnx import handler_util
from tensorflow_customops.python.onnx.handlers import roi, roi_boxes

_WIDENED = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
_NUMPY = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}


class _Builder:
    """Makes the nodes of one handler's composition in ctx."""

    def __init__(self, ctx, dtype):
        self.ctx = ctx
        self.dtype = dtype
        self.graph = GraphBuilder(ctx)

    def const(self, value, dtype=None):
        array = np.asarray(value, dtype=dtype or _NUMPY[self.dtype])
        return self.ctx.make_const(utils.make_name("ps_roi"), array).output[0]

    def int64(self, value):
        return self.const(value, np.int64)

    def op(self, op_type, *inputs, **attr):
        return self.ctx.make_node(op_type, list(inputs), attr=attr).output[0]

    def dims(self, tensor, start, end):
        """Dimensions [start, end) of tensor's shape, int64. (Shape's own
        start and end attributes would do, but tf2onnx's shape inference
        ignores them.)"""
        return self.graph.make_slice(
            {"data": self.op("Shape", tensor), "starts": [start], "ends": [end]}
        )

    def row(self, tensor, index):
        """Row `index` of a [M, K] tensor, as [1, K]."""
        return self.graph.make_slice(
            {"data": tensor, "starts": [index], "ends": [index + 1], "axes": [0]}
        )

    def round_half_away(self, x):
        """std::round: floor(|x|) + (fraction >= 0.5), with x's sign. The
        fraction |x| - floor(|x|) is exact in floating point; floor(|x| + 0.5)
        is not (0.49999997 + 0.5 rounds to 1)."""
        magnitude = self.op("Abs", x)
        whole = self.op("Floor", magnitude)
        up = self.op(
            "GreaterOrEqual", self.op("Sub", magnitude, whole), self.const(0.5)
        )
        whole = self.op("Add", whole, self.op("Cast", up, to=self.dtype))
        return self.op("Mul", self.op("Sign", x), whole)


def _compute_dtype(node, dtype):
    """The dtype the composition computes in: the kernels' accumulation type.
    TensorRT computes double as float, which moves the sub-boxes' edges by
    more than the composition allows for."""
    if dtype == TensorProto.DOUBLE and handler_util.target() == "tensorrt":
        handler_util.refuse(
            node, "TensorRT computes double as float; export float32 features"
        )
    return TensorProto.FLOAT if dtype in _WIDENED else dtype


def _grouped_features(b, node, bins):
    """The features as [N * bins, C / bins, H, W]: channel c * bins + g of
    image n (the group g that bin g pools) at batch index n * bins + g."""
    features = node.input[0]
    if b.ctx.get_dtype(features) != b.dtype:
        features = b.op("Cast", features, to=b.dtype)
    if not handler_util.is_nchw(node):
        # Two transposes that each move one axis, which ONNX Runtime does
        # several times faster than the one that moves three.
        features = b.op("Transpose", features, perm=[0, 3, 1, 2])
    # [N, C, H, W] -> [N, C', bins, H * W] -> [N, bins, C', H * W], every
    # size given and taken literally (allowzero): an empty map or batch
    # leaves -1 nothing to be inferred from.
    spatial = b.dims(features, 2, 4)
    pixels = b.graph.make_reduce_prod({"data": spatial, "axes": [0], "keepdims": 1})
    images = b.dims(features, 0, 1)
    groups = b.op("Div", b.dims(features, 1, 2), b.int64([bins]))
    split = b.op("Concat", images, groups, b.int64([bins]), pixels, axis=0)
    grouped = b.op(
        "Transpose", b.op("Reshape", features, split, allowzero=1), perm=[0, 2, 1, 3]
    )
    merged = b.op(
        "Concat", b.op("Mul", images, b.int64([bins])), groups, spatial, axis=0
    )
    return b.op("Reshape", grouped, merged, allowzero=1)


def _box_rows(b, node, spatial_scale):
    """Per-box rows [1, K]: x1, y1, x2, y2 scaled by spatial_scale in the
    compute type (as the kernels scale them), and the batch indices (int64),
    -1 for a box the kernels refuse (roi_boxes.checked_rois), which makes
    every group index of its sub-boxes negative and RoiAlign refuse them."""
    boxes, batch = roi_boxes.split_rois(b.ctx, node, 1, b.dtype)
    # The kernels scale by the float attribute, widened to double for double.
    scaled = b.op(
        "Transpose", b.op("Mul", boxes, b.const(np.float32(spatial_scale))), perm=[1, 0]
    )
    rows = [b.row(scaled, i) for i in range(4)]
    batch = b.graph.make_unsqueeze({"data": batch, "axes": [0]})
    return rows, batch


def _pool_edges(b, start, end, bins, size):
    """PsRoiPool's whole-pixel bins along one axis (PoolBin in
    roi_geometry.h, position-sensitive) as sub-box edges [bins, K]: lo and
    hi, which half_pixel mode turns into lo - 0.5 and hi - 0.5, so that the
    adaptive grid samples the pixel centres lo .. hi - 1, one each."""
    start = b.op("Cast", b.round_half_away(start), to=TensorProto.INT64)
    end = b.op("Cast", b.round_half_away(end), to=TensorProto.INT64)
    extent = b.op("Max", b.op("Sub", end, start), b.int64([[1]]))
    bin_size = b.op("Div", b.op("Cast", extent, to=b.dtype), b.const(float(bins)))
    index = np.arange(bins).reshape(bins, 1)
    limit = b.op("Sub", size, b.int64([1]))
    edges = []
    for edge in (
        b.op("Floor", b.op("Mul", b.const(index), bin_size)),
        b.op("Ceil", b.op("Mul", b.const(index + 1), bin_size)),
    ):
        edge = b.op("Add", b.op("Cast", edge, to=TensorProto.INT64), start)
        edge = b.op("Min", b.op("Max", edge, b.int64([[0]])), limit)
        edges.append(b.op("Cast", edge, to=b.dtype))
    return edges


class _Axis:
    """One axis of a bin grid: sub-box edges [bins, K] for half_pixel mode;
    for PsRoiAlign, which sub-boxes RoiAlign might sample differently from the
    kernel ([bins, K] bool) and, with the adaptive grid, which bins the
    kernel samples along the axis at all ([bins, K] bool); for PsRoiAlign
    with aligned=False, where RoiAlign reproduces the kernel's whole-box
    geometry along the axis ([1, K] bool): in output_half_pixel mode
    (`at_least_one`: it enlarges boxes to 1 pixel), in half_pixel mode with
    coordinates shifted by 0.5 (`shift_undone`: its -0.5 restores them
    exactly)."""

    def __init__(
        self,
        first,
        last,
        near_edge=None,
        sampled=None,
        at_least_one=None,
        shift_undone=None,
    ):
        self.first = first
        self.last = last
        self.near_edge = near_edge
        self.sampled = sampled
        self.at_least_one = at_least_one
        self.shift_undone = shift_undone


def _near_drop_edges(b, bin_start, bin_size, grid, size):
    """[bins, K] bool: whether a sample of the bin, as the kernel places it,
    lies within a few units in the last place of -1 or `size`, where
    bilinear sampling drops samples beyond (Bilinear in roi_geometry.h).

    There the sub-box's samples, which sit a few units in the last place from
    the kernel's, may fall on the other side. Positions are monotonic in the
    sample index, so only the samples next to each edge are checked: an
    estimate of the crossing and its neighbours, at the kernel's exact
    positions."""
    limit = b.op("Sub", grid, b.const(1.0))
    scale = b.op(
        "Add",
        b.op("Add", b.op("Abs", bin_start), b.op("Abs", bin_size)),
        b.op("Add", size, b.const(2.0)),
    )
    margin = b.op(
        "Mul", scale, b.const(2.0**-18 if b.dtype == TensorProto.FLOAT else 2.0**-47)
    )
    offsets = b.const(np.array([-1.0, 0.0, 1.0]).reshape(3, 1, 1))
    near = []
    for edge in (b.const(-1.0), size):
        estimate = b.op(
            "Sub",
            b.op("Div", b.op("Mul", b.op("Sub", edge, bin_start), grid), bin_size),
            b.const(0.5),
        )
        # NaN and infinities (bin_size 0) become 0, then the range of samples.
        estimate = b.op(
            "Where",
            b.op(
                "LessOrEqual",
                b.op("Abs", estimate),
                b.const(roi_boxes.MAX_SCALED_COORDINATE),
            ),
            estimate,
            b.const(0.0),
        )
        index = b.op("Add", b.op("Floor", estimate), offsets)
        index = b.op("Max", b.op("Min", index, limit), b.const(0.0))
        # The kernel's SamplePoint: start + (i + .5) * bin_size / grid.
        step = b.op(
            "Div", b.op("Mul", b.op("Add", index, b.const(0.5)), bin_size), grid
        )
        position = b.op("Add", bin_start, step)
        close = b.op("LessOrEqual", b.op("Abs", b.op("Sub", position, edge)), margin)
        close = b.graph.make_reduce_max(
            {
                "data": b.op("Cast", close, to=TensorProto.INT32),
                "axes": [0],
                "keepdims": 0,
            }
        )
        near.append(b.op("Cast", close, to=TensorProto.BOOL))
    return b.op("Or", *near)


def _align_axis(b, start, end, bins, offset, sampling_ratio, size):
    """PsRoiAlign's bins along one axis (MakeAlignBox in roi_geometry.h) as
    sub-boxes for half_pixel mode: bin j starts at start + j * bin_size and is
    bin_size long."""
    half = b.const(0.5)
    if offset:
        start = b.op("Sub", start, half)
        end = b.op("Sub", end, half)
    extent = b.op("Sub", end, start)
    bin_size = b.op("Div", extent, b.const(float(bins)))
    index = b.const(np.arange(bins).reshape(bins, 1))
    bin_start = b.op("Add", start, b.op("Mul", index, bin_size))
    first = b.op("Add", bin_start, half)
    last = b.op("Add", b.op("Add", bin_start, bin_size), half)
    size = b.op("Cast", size, to=b.dtype)
    exactness = {}
    if not offset:

        def undone(coordinate):
            shifted = b.op("Sub", b.op("Add", coordinate, half), half)
            return b.op("Equal", shifted, coordinate)

        exactness = {
            "at_least_one": b.op("GreaterOrEqual", extent, b.const(1.0)),
            "shift_undone": b.op("And", undone(start), undone(end)),
        }
    if sampling_ratio > 0:
        grid = b.const(float(sampling_ratio))
        near = _near_drop_edges(b, bin_start, bin_size, grid, size)
        return _Axis(first, last, near, **exactness)
    # RoiAlign's grid for the sub-box is the ceiling of its size as it
    # computes it; where rounding put that size across an integer from the
    # kernel's ceil(bin_size), move the far edge a few units in the last place.
    grid = b.op("Ceil", bin_size)
    near = _near_drop_edges(b, bin_start, bin_size, grid, size)
    got = b.op("Ceil", b.op("Sub", b.op("Sub", last, half), b.op("Sub", first, half)))
    ulps = 2.0**-21 if b.dtype == TensorProto.FLOAT else 2.0**-50
    step = b.op(
        "Mul",
        b.op("Max", b.op("Max", b.op("Abs", first), b.op("Abs", last)), b.const(1.0)),
        b.const(ulps),
    )
    direction = b.op(
        "Sub",
        b.op("Cast", b.op("Less", got, grid), to=b.dtype),
        b.op("Cast", b.op("Greater", got, grid), to=b.dtype),
    )
    last = b.op("Add", last, b.op("Mul", direction, step))
    # A bin the kernel gives no samples (grid <= 0) gets an empty sub-box:
    # a negative grid along one axis and a positive one along the other would
    # make RoiAlign size its sample table negative.
    sampled = b.op("Greater", grid, b.const(0.0))
    last = b.op("Where", sampled, last, first)
    return _Axis(first, last, near, sampled, **exactness)


def _whole_box_bins(b, node, pooled, features, boxes, batch, redo, mode, attr):
    """`pooled` ([bins * K, C']) with the rows where `redo` ([bins * K] bool)
    recomputed exactly: RoiAlign in `mode` over the whole box (`boxes`,
    [K, 4]), whose geometry is then the kernel's, on the bin's channel group,
    keeping that bin. Such rows are rare (see _near_drop_edges), and this
    costs a box's bins per row."""
    bins_h = node.get_attr_value("pooled_height")
    bins_w = node.get_attr_value("pooled_width")
    bins = bins_h * bins_w
    rows = b.op("Reshape", b.op("NonZero", redo), b.int64([-1]))
    # At least 1: ONNX Runtime refuses a zero divisor even with no rows.
    count = b.op("Max", b.dims(batch, 1, 2), b.int64([1]))
    bin_index = b.op("Div", rows, count)
    box = b.op("Mod", rows, count)
    rois = b.op("Gather", boxes, box, axis=0)
    groups = b.op(
        "Add",
        b.op(
            "Mul",
            b.op("Gather", b.op("Reshape", batch, b.int64([-1])), box),
            b.int64([bins]),
        ),
        bin_index,
    )
    attr = dict(
        attr,
        output_height=bins_h,
        output_width=bins_w,
        coordinate_transformation_mode=mode,
    )
    whole = roi.roi_align(b.ctx, features, rois, groups, attr, b.dtype)
    # [F, C', bins_h, bins_w] -> [F, C', bins] -> bin `bin_index` of each.
    whole = b.op("Reshape", whole, b.int64([0, 0, bins]))
    picked = b.graph.make_unsqueeze(
        {"data": b.graph.make_unsqueeze({"data": bin_index, "axes": [1]}), "axes": [2]}
    )
    picked = b.op(
        "Expand", picked, b.op("Concat", b.dims(whole, 0, 2), b.int64([1]), axis=0)
    )
    whole = b.graph.make_squeeze(
        {"data": b.op("GatherElements", whole, picked, axis=2), "axes": [2]}
    )
    return b.op(
        "ScatterND", pooled, b.graph.make_unsqueeze({"data": rows, "axes": [1]}), whole
    )


def _convert(ctx, node, axes_of):
    """Replaces `node` by RoiAlign over sub-boxes; `axes_of(b, rows, sizes)`
    gives the _Axis of x and y from the box rows and the map's (width,
    height)."""
    dtype = ctx.get_dtype(node.output[0])
    b = _Builder(ctx, _compute_dtype(node, dtype))
    bins_h = node.get_attr_value("pooled_height")
    bins_w = node.get_attr_value("pooled_width")
    bins = bins_h * bins_w
    features = _grouped_features(b, node, bins)
    scale = node.get_attr_value("spatial_scale")
    rows, batch = _box_rows(b, node, scale)
    sizes = (b.dims(features, 3, 4), b.dims(features, 2, 3))
    x, y = axes_of(b, rows, sizes)
    # Sub-boxes [bins_h, bins_w, K]: bin (i, j) of box k at (i * bins_w + j) * K + k.
    shape = b.op("Concat", b.int64([bins_h, bins_w]), b.dims(batch, 1, 2), axis=0)

    def spread(t, axis):
        return b.op(
            "Expand", b.graph.make_unsqueeze({"data": t, "axes": [axis]}), shape
        )

    coords = [
        b.graph.make_unsqueeze({"data": spread(edge, axis), "axes": [3]})
        for edge, axis in ((x.first, 0), (y.first, 1), (x.last, 0), (y.last, 1))
    ]
    rois = b.op("Reshape", b.op("Concat", *coords, axis=3), b.int64([-1, 4]))
    groups = b.op(
        "Add",
        b.op("Mul", batch, b.int64([[bins]])),
        b.int64(np.arange(bins).reshape(bins, 1)),
    )
    groups = b.op("Reshape", groups, b.int64([-1]))
    sampling_ratio = 0
    if node.type.endswith("PsRoiAlign"):
        sampling_ratio = max(node.get_attr_value("sampling_ratio"), 0)
    attr = {
        "coordinate_transformation_mode": "half_pixel",
        "mode": "avg",
        "output_height": 1,
        "output_width": 1,
        # Written even where 0: TensorRT's parser defaults it to 1.
        "sampling_ratio": sampling_ratio,
        "spatial_scale": 1.0,
    }
    pooled = roi.roi_align(b.ctx, features, rois, groups, attr, b.dtype)
    channels = b.dims(features, 1, 2)
    pooled = b.op("Reshape", pooled, b.op("Concat", b.int64([-1]), channels, axis=0))
    if x.near_edge is not None:
        near = b.op("Or", spread(x.near_edge, 0), spread(y.near_edge, 1))
        if x.sampled is not None:
            # Whole boxes with no samples along an axis would make RoiAlign
            # size its sample table negative (see _align_axis).
            sampled = b.op("And", spread(x.sampled, 0), spread(y.sampled, 1))
            near = b.op("And", near, sampled)
        near = b.op("Reshape", near, b.int64([-1]))
        boxes = b.op("Transpose", b.op("Concat", *rows, axis=0), perm=[1, 0])
        routes = [("half_pixel", None, None)]
        if x.at_least_one is not None:

            def both(name):
                holds = b.op(
                    "And", spread(getattr(x, name), 0), spread(getattr(y, name), 1)
                )
                return b.op("Reshape", holds, b.int64([-1]))

            large = both("at_least_one")
            shifted = b.op("And", both("shift_undone"), b.op("Not", large))
            routes = [("output_half_pixel", large, None), ("half_pixel", shifted, 0.5)]
        for mode, holds, shift in routes:
            redo = near if holds is None else b.op("And", near, holds)
            whole = b.op("Add", boxes, b.const(shift)) if shift else boxes
            pooled = _whole_box_bins(
                b, node, pooled, features, whole, batch, redo, mode, attr
            )
    # [bins * K, C'] -> [bins_h, bins_w, K, C'] -> the output's layout.
    shape = b.op("Concat", b.int64([bins_h, bins_w, -1]), channels, axis=0)
    pooled = b.op("Reshape", pooled, shape)
    perm = [2, 3, 0, 1] if handler_util.is_nchw(node) else [2, 0, 1, 3]
    steps = [("Transpose", {"perm": perm})]
    if b.dtype != dtype:
        steps.append(("Cast", {"to": dtype}))
    for op_type, step_attr in steps[:-1]:
        pooled = b.op(op_type, pooled, **step_attr)
    op_type, step_attr = steps[-1]
    outputs, shapes = list(node.output), [ctx.get_shape(node.output[0])]
    ctx.remove_node(node.name)
    ctx.make_node(
        op_type,
        [pooled],
        attr=step_attr,
        name=node.name,
        outputs=outputs,
        shapes=shapes,
        dtypes=[dtype],
    )


@handler_util.custom_op_handler("PsRoiPool", min_opset=16)
class PsRoiPool:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        def axes(b, rows, sizes):
            x1, y1, x2, y2 = rows
            return (
                _Axis(
                    *_pool_edges(
                        b, x1, x2, node.get_attr_value("pooled_width"), sizes[0]
                    )
                ),
                _Axis(
                    *_pool_edges(
                        b, y1, y2, node.get_attr_value("pooled_height"), sizes[1]
                    )
                ),
            )

        _convert(ctx, node, axes)


@handler_util.custom_op_handler("PsRoiAlign", min_opset=16)
class PsRoiAlign:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        aligned = node.get_attr_value("aligned")
        sampling_ratio = node.get_attr_value("sampling_ratio")

        def axes(b, rows, sizes):
            x1, y1, x2, y2 = rows
            width = node.get_attr_value("pooled_width")
            height = node.get_attr_value("pooled_height")
            return (
                _align_axis(b, x1, x2, width, aligned, sampling_ratio, sizes[0]),
                _align_axis(b, y1, y2, height, aligned, sampling_ratio, sizes[1]),
            )

        _convert(ctx, node, axes)
