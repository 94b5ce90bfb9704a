"""C++ gradients (`REGISTER_OP_GRADIENT`) as TF2 gradients.

TensorFlow keeps two gradient registries. `tf.GradientTape`, `tf.gradients`
and Keras read the Python one (`tf.RegisterGradient`); the C++ one is read by
the `SymbolicGradient` op alone, which works in `tf.compat.v1` graphs only.
This module bridges them: `cpp_gradient(op, *grads)` is a Python gradient
function that instantiates the op's C++ gradient for the op's attrs (in the op
library, with TensorFlow's own function instantiation: `$T` placeholders,
`list(type)` and `N * T` arguments) and runs it as a graph inside a cached
`tf.function`, so it works in eager mode, in `tf.function`, and under outer
tapes (second-order gradients).

`register_missing_gradients()` (run at import) registers it for every op of
the library that has a C++ gradient and no Python one: an op needs only one
gradient, written once in C++.
"""

import ctypes
import functools

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, graph_pb2, node_def_pb2
from tensorflow.python.framework import op_def_registry
from tensorflow.python.framework import ops as framework_ops

from tensorflow_customops.python.ops import load_library


@functools.cache
def _bridge():
    load_library.load_op_library()  # registers the ops and their gradients
    lib = ctypes.CDLL(load_library.library_path())
    lib.TfcoHasCppGradient.argtypes = [ctypes.c_char_p]
    lib.TfcoHasCppGradient.restype = ctypes.c_int
    lib.TfcoCppGradientGraph.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_void_p),
    ]
    lib.TfcoCppGradientGraph.restype = ctypes.c_int
    lib.TfcoFree.argtypes = [ctypes.c_void_p]
    return lib


def has_cpp_gradient(op_type):
    """Whether `op_type` has a C++ gradient (`REGISTER_OP_GRADIENT`)."""
    return bool(_bridge().TfcoHasCppGradient(op_type.encode()))


def _take_bytes(pointer, size=-1):
    """The bytes the bridge allocated (-1: up to a NUL), freed."""
    try:
        return ctypes.string_at(pointer, size)
    finally:
        _bridge().TfcoFree(pointer)


def _attr_value(attr_type, value):
    """The AttrValue of a Python attr value, by the OpDef's attr type."""
    if attr_type == "type":
        return attr_value_pb2.AttrValue(type=tf.as_dtype(value).as_datatype_enum)
    if attr_type == "list(type)":
        types = [tf.as_dtype(t).as_datatype_enum for t in value]
        return attr_value_pb2.AttrValue(
            list=attr_value_pb2.AttrValue.ListValue(type=types)
        )
    if attr_type == "int":
        return attr_value_pb2.AttrValue(i=value)
    if attr_type == "float":
        return attr_value_pb2.AttrValue(f=value)
    if attr_type == "bool":
        return attr_value_pb2.AttrValue(b=value)
    if attr_type == "string":
        return attr_value_pb2.AttrValue(
            s=value if isinstance(value, bytes) else value.encode()
        )
    if attr_type == "list(int)":
        return attr_value_pb2.AttrValue(
            list=attr_value_pb2.AttrValue.ListValue(i=value)
        )
    if attr_type == "list(float)":
        return attr_value_pb2.AttrValue(
            list=attr_value_pb2.AttrValue.ListValue(f=value)
        )
    raise TypeError(f"cpp_gradient: attrs of type {attr_type} are not supported")


def _node_def(op):
    """The NodeDef (op type and every attr) of a graph op or of the mock op
    eager gradients get, which has no node_def."""
    op_def = op_def_registry.get(op.type)
    node = node_def_pb2.NodeDef(name="forward", op=op.type)
    for attr in op_def.attr:
        node.attr[attr.name].CopyFrom(_attr_value(attr.type, op.get_attr(attr.name)))
    return node


def _gradient_graph(node):
    graph_def = ctypes.c_void_p()
    size = ctypes.c_size_t()
    error = ctypes.c_void_p()
    serialized = node.SerializeToString()
    status = _bridge().TfcoCppGradientGraph(
        serialized,
        len(serialized),
        ctypes.byref(graph_def),
        ctypes.byref(size),
        ctypes.byref(error),
    )
    if status:
        message = _take_bytes(error.value).decode()
        raise LookupError(f"No C++ gradient for {node.op}: {message}")
    return graph_pb2.GraphDef.FromString(_take_bytes(graph_def.value, size.value))


@functools.lru_cache(maxsize=1024)
def _gradient_function(node_bytes):
    """A `tf.function` of (op inputs..., upstream gradients...) returning the
    C++ gradient of each input, for one op type and set of attrs."""
    graph = _gradient_graph(node_def_pb2.NodeDef.FromString(node_bytes))
    # Nodes run as they are, except _Arg, which becomes a Const that
    # import_graph_def's input_map replaces by the argument (a Placeholder
    # would be rejected by XLA), and _Retval, whose input is returned.
    arg_names, retvals, nodes = {}, {}, []
    for node in graph.node:
        if node.op == "_Retval":
            retvals[node.attr["index"].i] = node.input[0]
            continue
        if node.op == "_Arg":
            arg_names[node.attr["index"].i] = node.name
            dtype = node.attr["T"].type
            node.op = "Const"
            node.attr.clear()
            node.attr["dtype"].type = dtype
            node.attr["value"].tensor.dtype = dtype
        nodes.append(node)
    graph = graph_pb2.GraphDef(node=nodes, versions=graph.versions)
    outputs = [
        retvals[i] if ":" in retvals[i] else retvals[i] + ":0"
        for i in range(len(retvals))
    ]
    names = [arg_names[i] for i in range(len(arg_names))]

    @tf.function(reduce_retracing=True, autograph=False)
    def gradient(*tensors):
        input_map = {name + ":0": t for name, t in zip(names, tensors)}
        return tf.graph_util.import_graph_def(
            graph, input_map=input_map, return_elements=outputs, name="cpp_gradient"
        )

    return gradient


def cpp_gradient(op, *grads):
    """A Python gradient function that runs `op`'s C++ gradient.

    Register it with `tf.RegisterGradient(op_type)(cpp_gradient)`; for the
    library's ops `register_missing_gradients` does so.
    """
    if not any(t.dtype.is_floating for t in op.inputs):
        return [None] * len(op.inputs)  # nothing to differentiate
    grads = [
        tf.zeros_like(out) if g is None else g for out, g in zip(op.outputs, grads)
    ]
    node = _node_def(op)
    gradient = _gradient_function(node.SerializeToString(deterministic=True))
    return list(gradient(*op.inputs, *grads))


def register_missing_gradients():
    """Registers `cpp_gradient` for every library op with a C++ gradient and
    no Python gradient. Returns the op types it registered."""
    registered = []
    for op_def in load_library.op_list().op:
        try:
            framework_ops._gradient_registry.lookup(op_def.name)  # pylint: disable=protected-access
        except LookupError:
            if has_cpp_gradient(op_def.name):
                tf.RegisterGradient(op_def.name)(cpp_gradient)
                registered.append(op_def.name)
    return registered
