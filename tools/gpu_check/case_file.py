"""Reads and writes the GPU check's case files, with NumPy alone.

The GPU machine has no TensorFlow, so the cases travel as one binary file that
this module and case_file.cc both read. Little-endian throughout:

    magic     8 bytes  b"TFCOGPU1"
    count     u32      number of cases
    per case:
      name    str      unique, e.g. "my_op/float32/NHWC/fwd"
      op      str      the functor to run, e.g. "MyOp"
      attrs   u32 n, then n x (str key, f64 value)
      tensors u32 n, then n x (str key, u8 role, u8 dtype, u32 rank,
                               rank x i64 dims, u64 byte count, bytes)
    str = u32 byte count, then UTF-8 bytes

Role 0 is an input, role 1 an expected output; a file of GPU results holds
the outputs alone, with role 1. bfloat16 travels as its 16 raw bits.
"""

import dataclasses
import struct

import numpy as np

MAGIC = b"TFCOGPU1"
INPUT = 0
OUTPUT = 1

# Codes shared with case_file.h. NumPy has no bfloat16: it is stored as the
# upper 16 bits of float32 (uint16 in NumPy), marked by its own code.
DTYPES = {
    "float16": 1,
    "bfloat16": 2,
    "float32": 3,
    "float64": 4,
    "int32": 5,
    "int64": 6,
    "int8": 7,
    "uint8": 8,
}
_NUMPY = {
    1: np.float16,
    2: np.uint16,
    3: np.float32,
    4: np.float64,
    5: np.int32,
    6: np.int64,
    7: np.int8,
    8: np.uint8,
}


@dataclasses.dataclass
class Tensor:
    dtype: str  # a key of DTYPES
    value: np.ndarray  # bfloat16 as uint16 bits

    def as_float64(self):
        if self.dtype == "bfloat16":
            bits = self.value.astype(np.uint32) << 16
            return bits.view(np.float32).astype(np.float64)
        return self.value.astype(np.float64)


@dataclasses.dataclass
class Case:
    name: str
    op: str
    attrs: dict = dataclasses.field(default_factory=dict)
    inputs: dict = dataclasses.field(default_factory=dict)  # key -> Tensor
    outputs: dict = dataclasses.field(default_factory=dict)  # key -> Tensor


def bfloat16_bits(values):
    """float32 values (already representable in bfloat16) as their bits."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _str(text):
    data = text.encode("utf-8")
    return struct.pack("<I", len(data)) + data


def _tensor(key, role, tensor):
    if tensor.dtype not in DTYPES:
        raise ValueError(f"tensor {key!r}: unsupported dtype {tensor.dtype!r}")
    # np.array, not np.ascontiguousarray, which makes scalars 1-D.
    value = np.array(tensor.value, _NUMPY[DTYPES[tensor.dtype]], order="C")
    data = value.astype(value.dtype.newbyteorder("<"), copy=False).tobytes()
    return b"".join(
        [
            _str(key),
            struct.pack("<BBI", role, DTYPES[tensor.dtype], value.ndim),
            struct.pack(f"<{value.ndim}q", *value.shape),
            struct.pack("<Q", len(data)),
            data,
        ]
    )


def dumps(cases):
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError("case names must be unique")
    parts = [MAGIC, struct.pack("<I", len(cases))]
    for case in cases:
        parts += [_str(case.name), _str(case.op), struct.pack("<I", len(case.attrs))]
        for key in sorted(case.attrs):
            parts += [_str(key), struct.pack("<d", float(case.attrs[key]))]
        tensors = [(k, INPUT, t) for k, t in case.inputs.items()]
        tensors += [(k, OUTPUT, t) for k, t in case.outputs.items()]
        parts.append(struct.pack("<I", len(tensors)))
        parts += [_tensor(k, role, t) for k, role, t in tensors]
    return b"".join(parts)


class _Reader:
    def __init__(self, data):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, size):
        if self.pos + size > len(self.data):
            raise ValueError(f"case file truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def str(self):
        (size,) = self.unpack("<I")
        return bytes(self.take(size)).decode("utf-8")


def loads(data):
    reader = _Reader(data)
    if bytes(reader.take(len(MAGIC))) != MAGIC:
        raise ValueError("not a GPU check case file (bad magic)")
    codes = {code: name for name, code in DTYPES.items()}
    cases = []
    for _ in range(reader.unpack("<I")[0]):
        case = Case(name=reader.str(), op=reader.str())
        for _ in range(reader.unpack("<I")[0]):
            key = reader.str()
            case.attrs[key] = reader.unpack("<d")[0]
        for _ in range(reader.unpack("<I")[0]):
            key = reader.str()
            role, code, rank = reader.unpack("<BBI")
            if code not in codes:
                raise ValueError(f"tensor {key!r}: unknown dtype code {code}")
            shape = reader.unpack(f"<{rank}q")
            (size,) = reader.unpack("<Q")
            value = np.frombuffer(
                reader.take(size), np.dtype(_NUMPY[code]).newbyteorder("<")
            )
            tensor = Tensor(codes[code], value.reshape(shape).astype(_NUMPY[code]))
            (case.inputs if role == INPUT else case.outputs)[key] = tensor
        cases.append(case)
    if reader.pos != len(reader.data):
        raise ValueError("trailing bytes after the last case")
    return cases


def write(path, cases):
    with open(path, "wb") as f:
        f.write(dumps(cases))


def read(path):
    with open(path, "rb") as f:
        return loads(f.read())
