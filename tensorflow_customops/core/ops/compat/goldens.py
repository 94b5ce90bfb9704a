"""Golden GraphDefs of the CustomOps> ops, built from their recorded specs.

For each op and each version in its history (ops_history_v1/), a golden is a
text GraphDef (`v<N>.pbtxt`) and its feeds and expected fetches
(`v<N>.json`) under testdata/<op file stem>/. The graph has one case per
allowed value of each type attr; a case holds placeholders, the op node with
exactly the attrs that spec had, and, for differentiable ops with
floating-point arguments, a SymbolicGradient node (the C++ gradient).

Inputs are made from the OpDef alone: small numbers of the argument's dtype,
shape [2, 3]. An op that needs structured inputs (boxes, indices) or values
for attrs without a default gives its registry entry a `golden` Override
(tensorflow_customops/python/registry/).
"""

import dataclasses
import glob
import hashlib
import json
import os
import re
import zlib

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import attr_value_pb2, graph_pb2, op_def_pb2
from tensorflow.python.framework import ops as ops_lib

from tensorflow_customops.python import registry
from tensorflow_customops.python.registry.entry import Override

PREFIX = "CustomOps>"
COMPAT_DIR = "tensorflow_customops/core/ops/compat"
HISTORY_DIR = os.path.join(COMPAT_DIR, "ops_history_v1")
TESTDATA_DIR = os.path.join(COMPAT_DIR, "testdata")
MANIFEST = "SHA256SUMS"
RECORD_COMMAND = "bazel run //tensorflow_customops/core/ops/compat:record_goldens"
UPDATE_COMMAND = "bazel run //tensorflow_customops/core/ops/compat:update_ops_history"
_SHAPE = (2, 3)


def _override(op_name):
    """The golden Override of `op_name`'s registry entry (an op of an older
    history that the library no longer registers gets the generic rules)."""
    entry = registry.entries().get(op_name)
    return entry.golden if entry else Override()


def redefined_gradients(op_name):
    """Input index -> why, for `op_name`'s gradients defined anew after its
    goldens were recorded (Override.redefined_gradients)."""
    return _override(op_name).redefined_gradients


def file_stem(op_name):
    """'CustomOps>Foo' -> 'CustomOps_Foo', as the history files."""
    return op_name.replace(">", "_")


def read_history(root="."):
    """Op name -> its recorded OpDefs, oldest first."""
    history = {}
    directory = os.path.join(root, HISTORY_DIR)
    for file_name in sorted(os.listdir(directory)):
        if file_name.endswith(".pbtxt"):
            with open(os.path.join(directory, file_name)) as f:
                versions = text_format.Parse(f.read(), op_def_pb2.OpList())
            history[versions.op[0].name] = list(versions.op)
    return history


def golden_paths(op_name, version, root="."):
    """The (GraphDef, data) files of one version's golden."""
    base = os.path.join(root, TESTDATA_DIR, file_stem(op_name), f"v{version}")
    return base + ".pbtxt", base + ".json"


def _default_value(op_name, attr):
    if attr.name in _override(op_name).attrs:
        return _override(op_name).attrs[attr.name]
    if attr.HasField("default_value"):
        return attr.default_value
    if attr.type == "type":
        allowed = attr.allowed_values.list.type
        return attr_value_pb2.AttrValue(type=allowed[0] if allowed else tf.float32)
    if attr.type == "int":
        return attr_value_pb2.AttrValue(i=max(attr.minimum, 1))
    raise ValueError(
        f"attr '{attr.name}' of {op_name} has no default; give it a value in the "
        "golden Override of the op's entry in tensorflow_customops/python/registry/"
    )


def cases(op_def):
    """(case name, complete attrs) pairs: every allowed value of each type attr,
    the other attrs at their defaults."""
    defaults = {a.name: _default_value(op_def.name, a) for a in op_def.attr}
    override = _override(op_def.name)
    result = {}
    for attr in op_def.attr:
        if attr.type != "type" or attr.name in override.attrs:
            continue
        for dtype in attr.allowed_values.list.type or [defaults[attr.name].type]:
            attrs = dict(defaults)
            attrs[attr.name] = attr_value_pb2.AttrValue(type=dtype)
            if override.tie_types:
                attrs = override.tie_types(attrs)
            name = "_".join(
                f"{a.name}_{tf.as_dtype(attrs[a.name].type).name}"
                for a in op_def.attr
                if a.type == "type"
            )
            result[name] = attrs
    return sorted(result.items()) or [("default", defaults)]


def _arg_dtypes(args, attrs):
    dtypes = []
    for arg in args:
        if arg.type_list_attr:
            dtypes += [tf.as_dtype(t) for t in attrs[arg.type_list_attr].list.type]
            continue
        dtype = tf.as_dtype(arg.type or attrs[arg.type_attr].type)
        dtypes += [dtype] * (attrs[arg.number_attr].i if arg.number_attr else 1)
    return dtypes


def _generic_inputs(dtypes, rng):
    arrays = []
    for dtype in dtypes:
        if dtype.is_floating:
            # Nonzero, and exact in every float type after rounding.
            magnitudes = np.round(rng.uniform(0.25, 2.0, size=_SHAPE), 2)
            values = magnitudes * rng.choice([-1.0, 1.0], size=_SHAPE)
        elif dtype.is_bool:
            values = rng.integers(0, 2, size=_SHAPE)
        else:
            # Nonzero, so a kernel that zeroes everything cannot pass.
            values = rng.integers(1, 10, size=_SHAPE)
        arrays.append(values.astype(dtype.as_numpy_dtype))
    return arrays


def _differentiable(op_name, in_dtypes, out_dtypes):
    # SymbolicGradient needs a C++ gradient: gradient ops (FooGrad,
    # FooGradBoxes) have only Python ones, for second-order gradients.
    if re.search(r"Grad([A-Z]|$)", op_name):
        return False
    try:
        grad_fn = ops_lib._gradient_registry.lookup(op_name)  # pylint: disable=protected-access
    except LookupError:
        return False
    return grad_fn is not None and all(d.is_floating for d in in_dtypes + out_dtypes)


def _node(graph_def, name, op, inputs=(), **attrs):
    node = graph_def.node.add(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def _placeholder(graph_def, name, dtype):
    _node(
        graph_def,
        name,
        "Placeholder",
        dtype=attr_value_pb2.AttrValue(type=dtype.as_datatype_enum),
        shape=attr_value_pb2.AttrValue(shape=tf.TensorShape(None).as_proto()),
    )
    return name + ":0"


@dataclasses.dataclass
class Golden:
    graph_def: graph_pb2.GraphDef
    feeds: dict  # tensor name -> numpy array
    fetches: list  # tensor names
    gradients: list  # {"xs", "ys", "dys", "dxs"}: lists of tensor names


def build(op_def, op_cases):
    """The golden graph and feeds of `op_def` for `op_cases` (from cases()).

    Each node of the op gets exactly the attrs in its case, so a historical
    OpDef gives the NodeDef a producer of that version wrote.
    """
    golden = Golden(graph_pb2.GraphDef(), {}, [], [])
    golden.graph_def.versions.producer = tf.version.GRAPH_DEF_VERSION
    golden.graph_def.versions.min_consumer = tf.version.GRAPH_DEF_VERSION_MIN_CONSUMER
    override = _override(op_def.name)
    builder = override.inputs or _generic_inputs
    for case, attrs in op_cases:
        in_dtypes = _arg_dtypes(op_def.input_arg, attrs)
        out_dtypes = _arg_dtypes(op_def.output_arg, attrs)
        rng = np.random.default_rng(zlib.crc32(f"{op_def.name}/{case}".encode()))
        xs = []
        for i, (dtype, value) in enumerate(zip(in_dtypes, builder(in_dtypes, rng))):
            xs.append(_placeholder(golden.graph_def, f"{case}/x{i}", dtype))
            golden.feeds[xs[-1]] = value
        op_attrs = {key: attrs[key] for key in sorted(attrs)}
        _node(golden.graph_def, f"{case}/op", op_def.name, xs, **op_attrs)
        ys = [f"{case}/op:{i}" for i in range(len(out_dtypes))]
        golden.fetches += ys
        if not _differentiable(op_def.name, in_dtypes, out_dtypes):
            continue
        dys = []
        grads_builder = override.output_grads or _generic_inputs
        for i, (dtype, value) in enumerate(
            zip(out_dtypes, grads_builder(out_dtypes, rng))
        ):
            dys.append(_placeholder(golden.graph_def, f"{case}/dy{i}", dtype))
            golden.feeds[dys[-1]] = value
        f = attr_value_pb2.NameAttrList(name=op_def.name, attr=op_attrs)
        _node(
            golden.graph_def,
            f"{case}/grad",
            "SymbolicGradient",
            xs + dys,
            Tin=_type_list(in_dtypes + out_dtypes),
            Tout=_type_list(in_dtypes),
            f=attr_value_pb2.AttrValue(func=f),
        )
        dxs = [f"{case}/grad:{i}" for i in range(len(in_dtypes))]
        golden.fetches += dxs
        golden.gradients.append({"xs": xs, "ys": ys, "dys": dys, "dxs": dxs})
    return golden


def _type_list(dtypes):
    return attr_value_pb2.AttrValue(
        list=attr_value_pb2.AttrValue.ListValue(
            type=[d.as_datatype_enum for d in dtypes]
        )
    )


def run_v1(graph_def, feeds, fetches):
    """Imports `graph_def` (filling default attrs) and runs it in a Session.

    Returns the fetched values and the imported graph.
    """
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as sess:
            values = sess.run(fetches, feed_dict=feeds)
    return dict(zip(fetches, values)), graph


def _encode(value):
    value = np.asarray(value)
    if value.dtype.kind == "f" or value.dtype == tf.bfloat16.as_numpy_dtype:
        values = [float(v) for v in value.astype(np.float64).ravel()]
    elif value.dtype == np.bool_:
        values = [bool(v) for v in value.ravel()]
    else:
        values = [int(v) for v in value.ravel()]
    return {
        "dtype": tf.as_dtype(value.dtype).name,
        "shape": list(value.shape),
        "values": values,
    }


def decode(entry):
    """A numpy array from a tensor entry of a golden's data file."""
    dtype = tf.as_dtype(entry["dtype"]).as_numpy_dtype
    return np.asarray(entry["values"]).astype(dtype).reshape(entry["shape"])


def spec_digest(op_def):
    return hashlib.sha256(op_def.SerializeToString(deterministic=True)).hexdigest()


def record(op_def, version):
    """The (GraphDef text, data text) of the golden of one historical spec."""
    golden = build(op_def, cases(op_def))
    outputs, _ = run_v1(golden.graph_def, golden.feeds, golden.fetches)
    data = {
        "op": op_def.name,
        "version": version,
        "spec_sha256": spec_digest(op_def),
        "feeds": {name: _encode(v) for name, v in golden.feeds.items()},
        "fetches": {name: _encode(v) for name, v in outputs.items()},
        "gradients": golden.gradients,
    }
    return (
        text_format.MessageToString(golden.graph_def),
        json.dumps(data, sort_keys=True, indent=1) + "\n",
    )


def read_manifest(root="."):
    """Golden path (relative to testdata/) -> recorded sha256, from every op
    folder's MANIFEST (one per op, so that recording an op's goldens touches
    no other op's files)."""
    manifest = {}
    for path in sorted(glob.glob(os.path.join(root, TESTDATA_DIR, "*", MANIFEST))):
        with open(path) as f:
            manifest.update(
                (name, digest)
                for digest, name in (line.split() for line in f if line.strip())
            )
    return manifest


def write_manifest(stem, manifest):
    """Writes the MANIFEST of op folder `stem` from `manifest`'s entries of
    that folder."""
    with open(os.path.join(TESTDATA_DIR, stem, MANIFEST), "w") as f:
        f.writelines(
            f"{digest}  {name}\n"
            for name, digest in sorted(manifest.items())
            if name.startswith(stem + "/")
        )


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
