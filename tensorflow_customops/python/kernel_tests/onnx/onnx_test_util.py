"""Runs exported models in ONNX Runtime for the export tests."""

import ml_dtypes
import numpy as np
import onnxruntime as ort
from onnx import TensorProto

from tensorflow_customops.python.onnx import export


def session(model, threads=1):
    """An ONNX Runtime CPU session of `model` (an onnx.ModelProto)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def feed(x):
    """`x` as ONNX Runtime takes it: bfloat16 arrays, to which its Python API
    maps no NumPy type, as their bits typed bfloat16. (It returns no bfloat16
    outputs either: a function under test casts them to float.)"""
    x = np.asarray(x)
    if x.dtype == ml_dtypes.bfloat16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            x.view(np.uint16), TensorProto.BFLOAT16
        )
    return x


def run(model, inputs):
    """The outputs of `model` in ONNX Runtime for `inputs`, in input order."""
    sess = session(model)
    feeds = {i.name: feed(x) for i, x in zip(sess.get_inputs(), inputs)}
    return sess.run(None, feeds)


def export_and_run(fn, input_signature, inputs, **export_kwargs):
    """Exports the tf.function `fn`, runs it in TensorFlow and in ONNX Runtime
    on `inputs`; returns (TensorFlow outputs, ONNX Runtime outputs), as lists
    of NumPy arrays, and the model."""
    model = export.export(fn, input_signature, **export_kwargs)
    expected = fn(*inputs)
    if not isinstance(expected, (list, tuple)):
        expected = [expected]
    return [np.asarray(e) for e in expected], run(model, inputs), model
