"""Smoke test of an installed tensorflow_customops, for any Python and
TensorFlow it installs next to: every op family forward against a NumPy
reference and its gradients (features, and boxes where the op has them)
against numeric differences (float64), a jit compilation (custom calls into
the kernels on every release), a SavedModel round trip, a Keras fit step
with a RoI layer, and, where tf2onnx, onnx and onnxruntime are installed
(the wheel's onnx extra), an ONNX export run in ONNX Runtime.

Run it with the interpreter of the environment the wheel is installed in,
from outside the source tree:

    python -m tensorflow_customops.smoke

It prints one line per check (SKIPPED for the ONNX export without its
packages), then `N passed, N failed`, and exits 1 if a check failed.
"""

import importlib.util
import os
import sys
import tempfile
import traceback

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco

_CHECKS = []


class Skipped(Exception):
    """A check that cannot run here; not counted."""


def check(fn):
    _CHECKS.append(fn)
    return fn


def _close(actual, expected, tol=1e-6):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=tol, atol=tol)


def _max_gradient_error(fn, x):
    theoretical, numeric = tf.test.compute_gradient(fn, [x])
    return max(np.max(np.abs(t - n)) for t, n in zip(theoretical, numeric))


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


@check
def zero_out():
    _close(tfco.zero_out([[1, 2], [3, 4]]), [[1, 0], [0, 0]])


@check
def matrix_mul_and_gradient():
    a = np.random.default_rng(1).standard_normal((3, 4))
    b = np.random.default_rng(2).standard_normal((5, 4))
    _close(tfco.matrix_mul(a, b, transpose_b=True), a @ b.T, 1e-12)
    error = _max_gradient_error(lambda x: tfco.matrix_mul(x, b, transpose_b=True), a)
    assert error < 1e-8, error


@check
def clip_by_global_norm_and_gradient():
    t = [np.array([3.0, 4.0]), np.array([[12.0]])]
    clipped, norm = tfco.clip_by_global_norm(t, 6.5)
    _close(norm, 13.0)
    _close(clipped[0], [1.5, 2.0])
    error = _max_gradient_error(
        lambda x: tfco.clip_by_global_norm([x, t[1]], 6.5)[0][0], t[0]
    )
    assert error < 1e-8, error


@check
def check_numerics_n():
    tfco.check_numerics_n([tf.ones([2])], "fine")
    try:
        tfco.check_numerics_n([tf.constant([1.0, np.nan])], "smoke")
    except tf.errors.InvalidArgumentError as e:
        assert "smoke" in str(e) and "NaN" in str(e), e
    else:
        raise AssertionError("NaN not reported")


@check
def roi_align_and_gradient():
    got = tfco.roi_align(_FEATURES, _BOXES, 2, sampling_ratio=2)
    for k, box in enumerate(_BOXES):
        _close(got[k], _roi_align_reference(_FEATURES[int(box[0])], box, 2, 2), 1e-12)
    error = _max_gradient_error(
        lambda f: tfco.roi_align(f, _BOXES, 2, sampling_ratio=2), _FEATURES
    )
    assert error < 1e-8, error


@check
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
        _close(got, numeric, 1e-5)
        assert np.count_nonzero(got[:, 1:]) == 8, (op.__name__, got)


@check
def pooling_ops_and_gradients():
    features = np.tile(_FEATURES, (1, 1, 1, 4))  # 16 channels: 4 per bin
    for op in (tfco.roi_pool, tfco.ps_roi_pool, tfco.ps_roi_align):
        out = op(features, _BOXES, 2)
        assert np.all(np.isfinite(out)), op.__name__
        error = _max_gradient_error(lambda f, op=op: op(f, _BOXES, 2), features)
        assert error < 1e-8, (op.__name__, error)


@check
def deform_conv2d_and_gradients():
    # Zero offsets and a unit mask give tf.nn.conv2d; at offsets between
    # whole pixels, the gradients of all four inputs match numeric ones.
    rng = np.random.default_rng(1)
    filters = rng.normal(size=(3, 3, 4, 2))
    zeros, ones = np.zeros((2, 4, 5, 18)), np.ones((2, 4, 5, 9))
    got = tfco.deform_conv2d(_FEATURES, zeros, filters, mask=ones)
    _close(got, tf.nn.conv2d(_FEATURES, filters, 1, "VALID"), 1e-12)
    args = [
        _FEATURES,
        rng.uniform(-1.4, 1.4, size=zeros.shape),
        filters,
        rng.uniform(size=ones.shape),
    ]
    for index in range(4):

        def fn(t, index=index):
            x, offset, filt, mask = [t if i == index else a for i, a in enumerate(args)]
            return tfco.deform_conv2d(x, offset, filt, mask=mask)

        error = _max_gradient_error(fn, args[index])
        assert error < 1e-6, (index, error)


@check
def jit_compile():
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
        _close(c, e.numpy(), 0)
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


@check
def saved_model_round_trip():
    class Pool(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 6, 7, 4], tf.float64)])
        def __call__(self, features):
            return tfco.roi_align(features, _BOXES, 2, sampling_ratio=2)

    module = Pool()
    with tempfile.TemporaryDirectory() as directory:
        tf.saved_model.save(module, directory)
        loaded = tf.saved_model.load(directory)
        _close(loaded(_FEATURES), module(_FEATURES).numpy(), 0)


@check
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


@check
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
    _close(got, fn(features).numpy(), 0)


def main():
    print(
        f"Python {sys.version.split()[0]}, TensorFlow {tf.__version__}, "
        f"tensorflow_customops {tfco.__version__} from {os.path.dirname(tfco.__file__)}"
    )
    print(tfco.build_info())
    passed = failed = 0
    for fn in _CHECKS:
        try:
            fn()
        except Skipped as e:
            print(f"SKIPPED {fn.__name__}: {e}")
            continue
        except Exception:  # noqa: BLE001 - every failure is reported and counted
            failed += 1
            print(f"FAILED {fn.__name__}\n{traceback.format_exc()}")
        else:
            passed += 1
            print(f"PASSED {fn.__name__}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
