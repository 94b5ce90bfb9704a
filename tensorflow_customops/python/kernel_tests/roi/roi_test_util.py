"""Test cases and helpers shared by the RoI op tests."""

import dataclasses

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.roi import roi_reference
from tensorflow_customops.python.registry import boxes

OP_NAMES = ["roi_pool", "roi_align", "ps_roi_pool", "ps_roi_align"]
POSITION_SENSITIVE = {"ps_roi_pool", "ps_roi_align"}
SAMPLING = {"roi_align", "ps_roi_align"}


@dataclasses.dataclass
class Case:
    features_nhwc: np.ndarray  # float64
    rois: np.ndarray  # float32 (or float64) [K, 5]
    output_size: tuple
    spatial_scale: float
    sampling_ratio: int
    aligned: bool

    @property
    def batch(self):
        return self.features_nhwc.shape[0]

    @property
    def features_nchw(self):
        return np.transpose(self.features_nhwc, [0, 3, 1, 2])


def make_case(
    op,
    seed,
    spatial_scale=1.0,
    output_size=(3, 2),
    sampling_ratio=-1,
    aligned=True,
    batch=2,
    height=9,
    width=11,
):
    rng = np.random.default_rng(seed)
    channels = 2 * output_size[0] * output_size[1] if op in POSITION_SENSITIVE else 3
    features = rng.standard_normal((batch, height, width, channels))
    return Case(
        features_nhwc=features,
        rois=boxes.edge_cases(rng, batch, height, width, spatial_scale),
        output_size=tuple(output_size),
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        aligned=aligned,
    )


def sliding_off_case(op, sampling_ratio, aligned, height=5, width=6):
    """make_case with boxes 1.5 pixels long sliding across each border of the
    map in steps that do not divide the bins, from fully on to fully off: their
    samples cross -1 and the map's size, where Bilinear starts dropping them."""
    case = make_case(
        op,
        seed=11,
        output_size=(2, 2),
        sampling_ratio=sampling_ratio,
        aligned=aligned,
        height=height,
        width=width,
    )
    rows = []
    for shift in np.arange(-3.2, 1.8, 0.23):
        for n in range(case.batch):
            rows += [
                [n, 1.0, shift, 2.5, shift + 1.5],
                [n, 1.0, height - 1.5 - shift, 2.5, height - shift],
                [n, shift, 1.0, shift + 1.5, 2.5],
                [n, width - 1.5 - shift, 1.0, width - shift, 2.5],
            ]
    return dataclasses.replace(case, rois=np.array(rows, np.float32))


def float64_boxes_case(op, seed):
    """make_case with float64 boxes that float32 cannot hold: the edge cases
    moved by up to 1e-3 pixels."""
    case = make_case(op, seed=seed, spatial_scale=0.5)
    rois = case.rois.astype(np.float64)
    rng = np.random.default_rng(seed)
    rois[:, 1:] += rng.uniform(-1e-3, 1e-3, rois[:, 1:].shape)
    return dataclasses.replace(case, rois=rois)


def pooled_channels(op, case):
    channels = case.features_nhwc.shape[-1]
    if op in POSITION_SENSITIVE:
        return channels // (case.output_size[0] * case.output_size[1])
    return channels


def layout(features_nhwc, data_format):
    if data_format == "NCHW":
        return tf.transpose(features_nhwc, [0, 3, 1, 2])
    return tf.convert_to_tensor(features_nhwc)


def op_kwargs(op, case, output_size=None, data_format="NHWC"):
    kwargs = dict(
        output_size=case.output_size if output_size is None else output_size,
        spatial_scale=case.spatial_scale,
        data_format=data_format,
    )
    if op in SAMPLING:
        kwargs["sampling_ratio"] = case.sampling_ratio
    if op == "roi_align":
        kwargs["aligned"] = case.aligned
    return kwargs


def call(op, features, rois, case, output_size=None, data_format="NHWC"):
    """tfco.<op>(features, rois) with the case's attrs."""
    return getattr(tfco, op)(
        features, rois, **op_kwargs(op, case, output_size, data_format)
    )


def run_op(op, case, data_format="NHWC", dtype=tf.float32):
    """The op's output for `case`, as float64 NHWC NumPy."""
    features = layout(tf.cast(case.features_nhwc, dtype), data_format)
    out = call(op, features, case.rois, case, data_format=data_format)
    if data_format == "NCHW":
        out = tf.transpose(out, [0, 2, 3, 1])
    return tf.cast(out, tf.float64).numpy()


def reference(op, case):
    """The NumPy reference output for `case`, NHWC."""
    args = (case.features_nchw, case.rois, case.output_size, case.spatial_scale)
    if op == "roi_pool":
        out, _ = roi_reference.roi_pool(*args)
    elif op == "roi_align":
        out = roi_reference.roi_align(*args, case.sampling_ratio, case.aligned)
    elif op == "ps_roi_pool":
        out = roi_reference.ps_roi_pool(*args)
    else:
        out = roi_reference.ps_roi_align(*args, case.sampling_ratio)
    return np.transpose(out, [0, 2, 3, 1])
