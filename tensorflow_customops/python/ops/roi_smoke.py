"""The RoI family's smoke checks (python -m tensorflow_customops.smoke): the
ops forward against a NumPy reference and their feature and box gradients
against numeric differences (float64), a jit compilation (custom calls into
the kernels on every release), a SavedModel round trip, a Keras fit step
with a RoI layer, and, where tf2onnx, onnx and onnxruntime are installed
(the wheel's onnx extra), an ONNX export run in ONNX Runtime."""

import importlib.util
import os
import tempfile

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.platform.smoke_util import (
    Skipped,
    close,
    max_gradient_error,
    require_xla,
)

# One box per image over a 6 x 7 map of 4 channels. Distinct values 0.02
# apart, far more than the numeric gradient's steps, so no maximum changes
# places; box coordinates exact in float32, which the ops take them in.
_FEATURES = np.random.default_rng(0).permutation(2 * 6 * 7 * 4).reshape(2, 6, 7, 4) / 50
_BOXES = np.array([[0, 0.25, 0.625, 4.75, 3.875], [1, 1.125, 0.375, 5.875, 5.125]])


def _roi_align_reference(features, box, size, grid):
    """RoIAlign of one NHWC image (aligned=False), the sampling torchvision
    defines, looped in NumPy."""
    _, x1, y1, x2, y2 = box
    height, width = features.shape[:2]
    bin_h = max(y2 - y1, 1.0) / size
    bin_w = max(x2 - x1, 1.0) / size
    out = np.zeros((size, size, features.shape[2]))
    for ph in range(size):
        for pw in range(size):
            for iy in range(grid):
                for ix in range(grid):
                    y = min(max(y1 + (ph + (iy + 0.5) / grid) * bin_h, 0), height - 1)
                    x = min(max(x1 + (pw + (ix + 0.5) / grid) * bin_w, 0), width - 1)
                    y0, x0 = int(y), int(x)
                    y1_, x1_ = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
                    ly, lx = y - y0, x - x0
                    out[ph, pw] += (
                        (1 - ly) * (1 - lx) * features[y0, x0]
                        + (1 - ly) * lx * features[y0, x1_]
                        + ly * (1 - lx) * features[y1_, x0]
                        + ly * lx * features[y1_, x1_]
                    ) / (grid * grid)
    return out


def roi_align_and_gradient():
    got = tfco.roi_align(_FEATURES, _BOXES, 2, sampling_ratio=2)
    for k, box in enumerate(_BOXES):
        close(got[k], _roi_align_reference(_FEATURES[int(box[0])], box, 2, 2), 1e-12)
    error = max_gradient_error(
        lambda f: tfco.roi_align(f, _BOXES, 2, sampling_ratio=2), _FEATURES
    )
    assert error < 1e-8, error


def box_gradients():
    # roi_align and ps_roi_align through their box gradient ops: the
    # gradient of a weighted sum against central differences in the box
    # coordinates, with steps exact in float32 that move no sample across a
    # pixel's edge (the samples stay 1/32 pixel or more from every edge).
    features = tf.constant(np.tile(_FEATURES, (1, 1, 1, 4)))
    step = 2.0**-10
    for op in (tfco.roi_align, tfco.ps_roi_align):
        weights = np.random.default_rng(1).standard_normal(
            op(features, _BOXES, 2, sampling_ratio=2).shape
        )

        def loss(boxes, op=op, weights=weights):
            return tf.reduce_sum(op(features, boxes, 2, sampling_ratio=2) * weights)

        boxes = tf.constant(_BOXES, tf.float32)
        with tf.GradientTape() as tape:
            tape.watch(boxes)
            value = loss(boxes)
        got = tape.gradient(value, boxes).numpy()
        numeric = np.zeros_like(_BOXES)
        for k in range(len(_BOXES)):
            for i in range(1, 5):
                moved = [_BOXES.copy(), _BOXES.copy()]
                moved[0][k, i] += step
                moved[1][k, i] -= step
                up, down = (float(loss(tf.constant(m, tf.float32))) for m in moved)
                numeric[k, i] = (up - down) / (2 * step)
        close(got, numeric, 1e-5)
        assert np.count_nonzero(got[:, 1:]) == 8, (op.__name__, got)


def pooling_ops_and_gradients():
    features = np.tile(_FEATURES, (1, 1, 1, 4))  # 16 channels: 4 per bin
    for op in (tfco.roi_pool, tfco.ps_roi_pool, tfco.ps_roi_align):
        out = op(features, _BOXES, 2)
        assert np.all(np.isfinite(out)), op.__name__
        error = max_gradient_error(lambda f, op=op: op(f, _BOXES, 2), features)
        assert error < 1e-8, (op.__name__, error)


def jit_compile():
    require_xla()
    boxes = tf.constant(_BOXES, tf.float32)

    def step(features):
        with tf.GradientTape() as tape:
            tape.watch(features)
            out = tfco.roi_align(features, boxes, 3, sampling_ratio=2, aligned=True)
        return out, tape.gradient(out, features)

    features = tf.constant(_FEATURES, tf.float32)
    eager = step(features)
    compiled = tf.function(step, jit_compile=True)(features)
    # Every glue calls the kernels themselves, with their bits and errors:
    # through typed FFI from TensorFlow 2.20, legacy custom calls before,
    # whose errors XLA raises as InternalError (docs/xla.md).
    api = tfco.build_info()["xla_custom_call_api"]
    release = tuple(int(part) for part in tf.__version__.split(".")[:2])
    assert api == ("typed_ffi" if release >= (2, 20) else "legacy"), (release, api)
    for e, c in zip(eager, compiled):
        close(c, e.numpy(), 0)
    bad = np.array(_BOXES, np.float32)
    bad[0, 0] = 9
    error = (
        tf.errors.InvalidArgumentError
        if api == "typed_ffi"
        else tf.errors.InternalError
    )
    try:
        tf.function(lambda f: tfco.roi_align(f, bad, 3), jit_compile=True)(features)
    except error as e:
        assert "(batch index) must be an integer" in str(e), e
    else:
        raise AssertionError("a bad batch index did not raise under jit")


def saved_model_round_trip():
    class Pool(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 6, 7, 4], tf.float64)])
        def __call__(self, features):
            return tfco.roi_align(features, _BOXES, 2, sampling_ratio=2)

    module = Pool()
    with tempfile.TemporaryDirectory() as directory:
        tf.saved_model.save(module, directory)
        loaded = tf.saved_model.load(directory)
        close(loaded(_FEATURES), module(_FEATURES).numpy(), 0)


def keras_fit_step():
    # tf.keras: Keras 2 on TensorFlow 2.12 to 2.15, Keras 3 from 2.16, as is
    # the `keras` the layers subclass.
    keras = tf.keras
    features = keras.Input((6, 7, 4))
    boxes = keras.Input((1, 4))
    counts = keras.Input((), dtype="int32")
    pooled = tfco.layers.RoIAlign(2, sampling_ratio=2)([features, boxes, counts])
    model = keras.Model(
        [features, boxes, counts], keras.layers.Dense(1)(keras.layers.Flatten()(pooled))
    )
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse")
    x = [
        _FEATURES.astype("float32"),
        _BOXES[:, None, 1:].astype("float32"),
        np.ones([2], "int32"),
    ]
    y = np.zeros([2, 1])
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=2, batch_size=2, verbose=0)
    after = model.evaluate(x, y, verbose=0)
    assert np.isfinite(after) and after < before, (before, after)


def onnx_export():
    modules = ("tf2onnx", "onnx", "onnxruntime")
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise Skipped(
            f"{', '.join(missing)} not installed (tensorflow-customops[onnx])"
        )
    import onnxruntime

    fn = tf.function(lambda f: tfco.roi_align(f, _BOXES, 2, sampling_ratio=2))
    spec = [tf.TensorSpec([None, 6, 7, 4], tf.float32)]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "roi_align.onnx")
        tfco.onnx.export(fn, spec, path=path)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    features = _FEATURES.astype(np.float32)
    (got,) = session.run(None, {session.get_inputs()[0].name: features})
    # ONNX's RoiAlign-16 samples as the kernel does: the same bits.
    close(got, fn(features).numpy(), 0)


CHECKS = [
    roi_align_and_gradient,
    box_gradients,
    pooling_ops_and_gradients,
    jit_compile,
    saved_model_round_trip,
    keras_fit_step,
    onnx_export,
]
