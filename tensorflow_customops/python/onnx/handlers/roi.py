"""ONNX handlers of the RoI family."""

import functools

import numpy as np
from onnx import TensorProto, helper
from tf2onnx import utils
from tf2onnx.graph_builder import GraphBuilder

from tensorflow_customops.python.onnx import handler_util
from tensorflow_customops.python.onnx.handlers import roi_boxes

# Feature dtypes ONNX's RoiAlign computes in; half and bfloat16 features are
# pooled in float, as the kernels accumulate them, and rounded once at the end.
_ROI_ALIGN_DTYPES = (TensorProto.FLOAT, TensorProto.DOUBLE)
_WIDENED = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


@handler_util.custom_op_handler("RoiAlign", min_opset=16)
class RoiAlign:
    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        dtype = ctx.get_dtype(node.output[0])
        compute = TensorProto.FLOAT if dtype in _WIDENED else dtype
        if compute not in _ROI_ALIGN_DTYPES:
            handler_util.refuse(node, "ONNX RoiAlign takes float or double features")
        if compute == TensorProto.DOUBLE and handler_util.target() == "tensorrt":
            handler_util.refuse(
                node,
                "TensorRT computes double as float: cast the features to float32, "
                'or export for target="onnxruntime"',
            )
        features = handler_util.nchw_input(ctx, node, 0)
        if compute != dtype:
            features = ctx.make_node("Cast", [features], attr={"to": compute}).output[0]
        boxes, batch = roi_boxes.split_rois(ctx, node, 1, compute)
        aligned = node.get_attr_value("aligned")
        sampling_ratio = node.get_attr_value("sampling_ratio")
        if aligned and sampling_ratio <= 0:
            boxes = _sampled_boxes(ctx, node, boxes, compute)
        attr = {
            # output_half_pixel also enlarges boxes to 1x1, as aligned=False does.
            "coordinate_transformation_mode": "half_pixel"
            if aligned
            else "output_half_pixel",
            "mode": "avg",
            "output_height": node.get_attr_value("pooled_height"),
            "output_width": node.get_attr_value("pooled_width"),
            # Written even where 0: TensorRT's parser defaults it to 1.
            "sampling_ratio": max(sampling_ratio, 0),
            "spatial_scale": node.get_attr_value("spatial_scale"),
        }
        pooled = roi_align(ctx, features, boxes, batch, attr, compute)
        if compute == dtype:
            handler_util.replace_with_nchw_op(ctx, node, "Identity", [pooled], {})
        else:
            handler_util.replace_with_nchw_op(
                ctx, node, "Cast", [pooled], {"to": dtype}
            )


def roi_align(ctx, features, boxes, batch, attr, dtype):
    """ONNX's RoiAlign of NCHW `features` of `dtype`, or zeros where the map
    has no rows or no columns: there ONNX Runtime's RoiAlign reads the map's
    first element for every sample, dropped or not, and crashes, while the
    kernels pool every box to zeros. An If, so that neither branch copies the
    map. Not for TensorRT, with which the guard has not been tried."""
    if handler_util.target() == "tensorrt":
        return handler_util.op(ctx, "RoiAlign", features, boxes, batch, **attr)
    make = functools.partial(handler_util.op, ctx)
    builder = GraphBuilder(ctx)
    shape = make("Shape", features)
    empty = make(
        "Equal",
        builder.make_reduce_min(
            {
                "data": builder.make_slice(
                    {"data": shape, "starts": [2], "ends": [4], "axes": [0]}
                ),
                "axes": [0],
                "keepdims": 0,
            }
        ),
        handler_util.const(ctx, 0, np.int64),
    )
    bins = [attr["output_height"], attr["output_width"]]
    pooled_shape = make(
        "Concat",
        builder.make_slice(
            {"data": make("Shape", boxes), "starts": [0], "ends": [1], "axes": [0]}
        ),
        builder.make_slice({"data": shape, "starts": [1], "ends": [2], "axes": [0]}),
        handler_util.const(ctx, bins, np.int64),
        axis=0,
    )
    branches = {}
    for branch, (op_type, inputs, op_attr) in (
        (
            "then_branch",
            (
                "ConstantOfShape",
                [pooled_shape],
                {"value": helper.make_tensor("value", dtype, [1], [0])},
            ),
        ),
        ("else_branch", ("RoiAlign", [features, boxes, batch], attr)),
    ):
        graph = ctx.create_new_graph_with_same_config()
        graph.parent_graph = ctx
        out = graph.make_node(op_type, inputs, attr=op_attr).output[0]
        graph.add_graph_output(out, dtype, [-1, -1, *bins])
        branches[branch] = graph
    return ctx.make_node(
        "If",
        [empty],
        shapes=[[-1, -1, *bins]],
        dtypes=[dtype],
        branches=branches,
    ).output[0]


def _sampled_boxes(ctx, node, boxes, dtype):
    """`boxes` ([K, 4] of `dtype`, for aligned=True and an adaptive grid)
    with [0, 0, 0, 0] in place of every box with no sampling point along an
    axis (ceil(extent / bins) <= 0, computed as the kernels do), which the
    kernels pool to zeros; ONNX Runtime fails on a box with points along one
    axis and a negative count along the other.
    """
    np_dtype = utils.map_onnx_to_numpy_type(dtype)

    make = functools.partial(handler_util.op, ctx)

    def const(value):
        return handler_util.const(ctx, value, np_dtype)

    scaled = make(
        "Sub",
        make("Mul", boxes, const(np.float32(node.get_attr_value("spatial_scale")))),
        const(0.5),
    )
    starts, ends = (
        GraphBuilder(ctx).make_slice(
            {"data": scaled, "starts": [start], "ends": [start + 2], "axes": [1]}
        )
        for start in (0, 2)
    )
    bins = [node.get_attr_value("pooled_width"), node.get_attr_value("pooled_height")]
    grid = make("Ceil", make("Div", make("Sub", ends, starts), const([bins])))
    empty = make("Not", make("Greater", grid, const(0.0)))
    empty = make(
        "Cast",
        GraphBuilder(ctx).make_reduce_max(
            {
                "data": make("Cast", empty, to=TensorProto.INT32),
                "axes": [1],
                "keepdims": 1,
            }
        ),
        to=TensorProto.BOOL,
    )
    return make("Where", empty, const(0.0), boxes)


@handler_util.custom_op_handler("RoiPool", min_opset=16)
class RoiPool:
    """RoiPool -> MaxRoiPool, whose bins are the kernels' (boxes rounded half
    away from zero in float, end pixel inside, bins clipped to the map, empty
    bins 0, a running maximum from -FLT_MAX)."""

    @classmethod
    def version_16(cls, ctx, node, **kwargs):
        if handler_util.target() == "tensorrt":
            handler_util.refuse(
                node,
                "TensorRT's ONNX parser takes no MaxRoiPool; export for "
                'target="onnxruntime", or use RoiAlign',
            )
        if ctx.find_output_consumers(node.output[1]):
            handler_util.refuse(
                node,
                "argmax has no ONNX counterpart (MaxRoiPool has one output); "
                "export a graph that uses only the pooled output",
            )
        dtype = ctx.get_dtype(node.output[0])
        if dtype not in (TensorProto.FLOAT, *_WIDENED):
            # Rounding double features to float would change the maxima.
            handler_util.refuse(
                node,
                "ONNX Runtime's MaxRoiPool computes in float only: features "
                "must be float32, float16 or bfloat16, got "
                f"{TensorProto.DataType.Name(dtype).lower()}",
            )
        features = handler_util.nchw_input(ctx, node, 0)
        if dtype != TensorProto.FLOAT:
            features = ctx.make_node(
                "Cast", [features], attr={"to": TensorProto.FLOAT}
            ).output[0]
        # The kernels skip NaNs; MaxRoiPool keeps one met last in a bin. A NaN
        # made -inf is skipped by both, as the maximum starts at -FLT_MAX.
        features = handler_util.op(
            ctx,
            "Where",
            handler_util.op(ctx, "IsNaN", features),
            handler_util.const(ctx, -np.inf, np.float32),
            features,
        )
        # MaxRoiPool counts a box's pixels in int32 (and its bin ends, via
        # float), which a box spanning nearly 2^31 pixels overflows: refused,
        # where the kernels count in int64.
        rois = roi_boxes.checked_rois(ctx, node, 1, max_extent=2**31 - 1024)
        attr = {
            "pooled_shape": [
                node.get_attr_value("pooled_height"),
                node.get_attr_value("pooled_width"),
            ],
            "spatial_scale": node.get_attr_value("spatial_scale"),
        }
        if dtype == TensorProto.FLOAT:
            handler_util.replace_with_nchw_op(
                ctx, node, "MaxRoiPool", [features, rois], attr
            )
            return
        pooled = ctx.make_node("MaxRoiPool", [features, rois], attr=attr).output[0]
        handler_util.replace_with_nchw_op(ctx, node, "Cast", [pooled], {"to": dtype})
