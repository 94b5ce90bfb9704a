"""The boxes of the RoI ops' ONNX handlers (roi.py, ps_roi.py): the rows the
kernels refuse made invalid for ONNX Runtime too, and the split into boxes
and batch indices that ONNX's RoI ops take."""

import functools

import numpy as np
from onnx import TensorProto
from tf2onnx import utils
from tf2onnx.graph_builder import GraphBuilder

from tensorflow_customops.python.onnx import handler_util

# The kernels' bound on a box coordinate times spatial_scale
# (kMaxScaledCoordinate, roi_geometry.h).
MAX_SCALED_COORDINATE = float(1 << 30)


def checked_rois(ctx, node, index, features_index=0, max_extent=None):
    """The `[K, 5]` rows of input `index`, with batch index -1 in every row
    the kernels refuse (RoiOk in roi_geometry.h: a coordinate not finite or
    beyond 2^30 pixels once scaled, a batch index not an integer in [0, N)),
    which ONNX Runtime's RoiAlign and MaxRoiPool then refuse: they would
    truncate 0.9 to image 0, and MaxRoiPool pools a NaN box to zeros.
    Checked in double, as the kernels check. With `max_extent`, also every
    row whose box, its corners scaled in the rows' dtype, spans `max_extent`
    pixels or more along an axis. TensorRT cannot raise, so under its target
    the rows go as they are.
    """
    rois = node.input[index]
    if handler_util.target() == "tensorrt":
        return rois
    builder = GraphBuilder(ctx)

    make = functools.partial(handler_util.op, ctx)

    def double(value):
        return handler_util.const(ctx, value, np.float64)

    def columns(data, start, end):
        return builder.make_slice(
            {"data": data, "starts": [start], "ends": [end], "axes": [1]}
        )

    wide = make("Cast", rois, to=TensorProto.DOUBLE)
    scale_value = node.get_attr_value("spatial_scale")
    scale = double(scale_value)
    # 1 where a coordinate passes (NaN fails the comparison as isfinite).
    coordinate_ok = make(
        "Cast",
        make(
            "LessOrEqual",
            make("Abs", make("Mul", columns(wide, 1, 5), scale)),
            double(MAX_SCALED_COORDINATE),
        ),
        to=TensorProto.DOUBLE,
    )
    row_ok = make(
        "Equal",
        builder.make_reduce_min({"data": coordinate_ok, "axes": [1], "keepdims": 1}),
        double(1.0),
    )
    if max_extent is not None:
        dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(rois))
        corners = make(
            "Cast",
            make(
                "Mul", columns(rois, 1, 5), handler_util.const(ctx, scale_value, dtype)
            ),
            to=TensorProto.DOUBLE,
        )
        extent = make("Sub", columns(corners, 2, 4), columns(corners, 0, 2))
        narrow = make(
            "Cast",
            make("Less", extent, double(float(max_extent))),
            to=TensorProto.DOUBLE,
        )
        row_ok = make(
            "And",
            row_ok,
            make(
                "Equal",
                builder.make_reduce_min({"data": narrow, "axes": [1], "keepdims": 1}),
                double(1.0),
            ),
        )
    image = columns(wide, 0, 1)
    images = make(
        "Cast",
        builder.make_slice(
            {
                "data": make("Shape", node.input[features_index]),
                "starts": [0],
                "ends": [1],
                "axes": [0],
            }
        ),
        to=TensorProto.DOUBLE,
    )
    for image_ok in (
        make("Equal", image, make("Floor", image)),
        make("GreaterOrEqual", image, double(0.0)),
        make("Less", image, images),
    ):
        row_ok = make("And", row_ok, image_ok)
    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(rois))
    return make(
        "Concat",
        make(
            "Where", row_ok, columns(rois, 0, 1), handler_util.const(ctx, -1.0, dtype)
        ),
        columns(rois, 1, 5),
        axis=1,
    )


def split_rois(ctx, node, index, dtype):
    """Splits the `[K, 5]` rows of input `index` into boxes `[K, 4]` of
    `dtype` and batch indices, int64 `[K]`, as ONNX's RoiAlign takes them;
    rows the kernels refuse get batch index -1 (`checked_rois`).
    """
    rois = checked_rois(ctx, node, index)
    builder = GraphBuilder(ctx)
    boxes = builder.make_slice({"data": rois, "starts": [1], "ends": [5], "axes": [1]})
    column = builder.make_slice({"data": rois, "starts": [0], "ends": [1], "axes": [1]})
    batch = builder.make_squeeze({"data": column, "axes": [1]})
    batch = ctx.make_node("Cast", [batch], attr={"to": TensorProto.INT64}).output[0]
    if ctx.get_dtype(rois) != dtype:
        boxes = ctx.make_node("Cast", [boxes], attr={"to": dtype}).output[0]
    return boxes, batch
