"""NumPy arrays of any TensorFlow dtype, for inputs drawn by the fuzzer and
by the ops' fuzz hints."""

import dataclasses
import math

import ml_dtypes
import numpy as np
from tensorflow.core.framework import types_pb2

_NUMPY_TYPES = {
    types_pb2.DT_HALF: np.float16,
    types_pb2.DT_BFLOAT16: ml_dtypes.bfloat16,
    types_pb2.DT_FLOAT: np.float32,
    types_pb2.DT_DOUBLE: np.float64,
    types_pb2.DT_INT8: np.int8,
    types_pb2.DT_UINT8: np.uint8,
    types_pb2.DT_INT16: np.int16,
    types_pb2.DT_UINT16: np.uint16,
    types_pb2.DT_INT32: np.int32,
    types_pb2.DT_UINT32: np.uint32,
    types_pb2.DT_INT64: np.int64,
    types_pb2.DT_UINT64: np.uint64,
    types_pb2.DT_BOOL: np.bool_,
    types_pb2.DT_COMPLEX64: np.complex64,
    types_pb2.DT_COMPLEX128: np.complex128,
    types_pb2.DT_STRING: np.object_,
}


def numpy_type(dtype_enum):
    return _NUMPY_TYPES[dtype_enum]


def is_float(dtype_enum):
    return dtype_enum in (
        types_pb2.DT_HALF,
        types_pb2.DT_BFLOAT16,
        types_pb2.DT_FLOAT,
        types_pb2.DT_DOUBLE,
    )


@dataclasses.dataclass
class ZeroSized:
    """An empty tensor, made in the worker: numpy cannot hold shapes such as
    (0, 2**62), TensorFlow can."""

    shape: tuple
    dtype_enum: int
    size = 0

    @property
    def dtype(self):
        return np.dtype(numpy_type(self.dtype_enum))


def make_array(rng, dtype_enum, shape, low=-3.0, high=3.0):
    """Random values of `dtype_enum` (a DataType) in [low, high), shape
    `shape`: a numpy array, or a ZeroSized for an empty shape."""
    shape = tuple(shape)
    size = math.prod(shape)
    if size == 0:
        return ZeroSized(shape, dtype_enum)
    values = rng.uniform(low, high, size=shape)
    if dtype_enum == types_pb2.DT_STRING:
        return np.array([str(v).encode() for v in values.flat], object).reshape(shape)
    if dtype_enum in (types_pb2.DT_COMPLEX64, types_pb2.DT_COMPLEX128):
        return (values + 1j * values).astype(numpy_type(dtype_enum))
    if dtype_enum == types_pb2.DT_BOOL:
        return values > 0
    if not is_float(dtype_enum):
        values = np.floor(values)
    return values.astype(numpy_type(dtype_enum))


def dtype_enum_of(array):
    """The DataType of a numpy array or ZeroSized."""
    if isinstance(array, ZeroSized):
        return array.dtype_enum
    for enum, numpy_dtype in _NUMPY_TYPES.items():
        if array.dtype == np.dtype(numpy_dtype):
            return enum
    raise ValueError(f"no DataType for {array.dtype}")


def float_type(attrs):
    """A fuzz hint's floating type: the case's T, which may be one the op does
    not allow (the op must reject it), else float32."""
    return attrs.get("T", types_pb2.DT_FLOAT)


def small_dim(value, default=2):
    """An attr value usable as a tensor dimension in a fuzz hint (extreme
    values are not)."""
    return value if isinstance(value, int) and 1 <= value <= 8 else default
