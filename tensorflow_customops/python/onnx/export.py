"""Export of TensorFlow functions, Keras models and SavedModels that use the
custom ops to ONNX. tf2onnx and onnx are imported when an export runs, never
by `import tensorflow_customops`.
"""

import contextlib
import logging
import os

from tensorflow_customops.python.onnx.errors import ExportError
from tensorflow_customops.python.onnx.requirements import REQUIREMENTS

# The opset of an export whose ops need nothing newer: the lowest the
# handlers are written and tested for (a handler that needs a newer one says
# so in handler_util.MIN_OPSETS).
DEFAULT_OPSET = 16

# tf2onnx 1.17.0's OPSET_TO_IR_VERSION stops at 18; its handlers write no op
# that changed in 19, and with this entry its opset-19 models are valid.
_EXTRA_IR_VERSIONS = {19: 9}

_INSTALL = f"pip install tensorflow-customops[onnx] (or {' '.join(REQUIREMENTS)})"

_PREFIX = "CustomOps>"


def is_gradient_op(op_type):
    """Whether `op_type`, a library op, is a gradient (inference graphs have
    none to export)."""
    return op_type.startswith(_PREFIX) and "Grad" in op_type[len(_PREFIX) :]


def _import_converter():
    try:
        import onnx
        import tf2onnx.convert  # noqa: F401 - registers TensorFlow's handlers
    except ModuleNotFoundError as e:
        raise ImportError(
            f"tfco.onnx needs tf2onnx and onnx ({e.name.split('.')[0]} is missing): "
            f"{_INSTALL}"
        ) from e
    from tensorflow_customops.python.onnx import (
        handler_util,
        handlers,  # noqa: F401 - registers the custom ops' handlers
    )

    return onnx, tf2onnx, handler_util


def export(
    fn_or_model,
    input_signature=None,
    path=None,
    opset=None,
    target="onnxruntime",
    signature=None,
):
    """Converts a TensorFlow function or model to a checked ONNX model.

    Args:
      fn_or_model: a `tf.function` (traced with `input_signature`, or its own),
        a Keras model (its inputs, or `input_signature`), or the directory of
        a SavedModel (str or path-like; its `signature`).
      input_signature: a list of `tf.TensorSpec`; None dimensions stay
        dynamic in the model.
      path: where to write the model (`.onnx`), or None.
      opset: the ONNX opset; None picks the lowest that holds every op of the
        graph: 16, or the newest that the handler of one of its ops needs.
      target: "onnxruntime", or "tensorrt" for a model that TensorRT's ONNX
        parser takes (ops it lacks are refused or composed).
      signature: the SavedModel signature to export (default
        "serving_default"); only for a SavedModel directory.

    Returns:
      The `onnx.ModelProto`, checked by `onnx.checker` (full check).

    Raises:
      ExportError: the graph holds an op without a handler, a gradient op, an
        op the handlers refuse (an attribute, a dtype or the target), or the
        opset is too low for an op or not one tf2onnx can write.
      ValueError: a bad target, or no signature to trace a function with.
      ImportError: tf2onnx or onnx is not installed.
    """
    if target not in ("onnxruntime", "tensorrt"):
        raise ValueError(f'target must be "onnxruntime" or "tensorrt", got {target!r}')
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int)):
        raise ValueError(f"opset must be an int or None, got {opset!r}")
    onnx, tf2onnx, handler_util = _import_converter()
    import tensorflow as tf

    with tf.device("/cpu:0"):
        graph = _frozen_graph(fn_or_model, input_signature, signature, tf2onnx)
        ops = _op_types(graph.graph_def, graph.output_names)
        gradients = sorted(op for op in ops if is_gradient_op(op))
        if gradients:
            raise ExportError(
                "inference graphs only: the graph holds gradient ops, which have "
                "no ONNX export: " + _named(gradients, ops)
            )
        opset = _choose_opset(opset, ops, handler_util.MIN_OPSETS)
        mapping = tf2onnx.handler.tf_op.create_mapping(opset, None)
        unsupported = sorted(op for op in ops if op not in mapping)
        if unsupported:
            raise ExportError(
                f"no ONNX handler at opset {opset} for: {_named(unsupported, ops)}"
            )
        with _fixed_tf2onnx(opset, tf2onnx), _errors_of("tf2onnx") as logged:
            with handler_util.exporting(target) as refusals:
                model = _convert(graph, opset, tf2onnx)
    if refusals:
        raise ExportError("\n".join(refusals))
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        details = "".join(f"\n  tf2onnx: {m}" for m in logged)
        raise ExportError(f"the converted model is invalid: {e}{details}") from e
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model


class _Graph:
    """A frozen graph to convert, with what tf2onnx needs to name its ends."""

    def __init__(self, graph_def, input_names, output_names, renames, tables, name):
        self.graph_def = graph_def
        self.input_names = input_names
        self.output_names = output_names
        self.renames = renames
        self.tables = tables
        self.name = name


def _frozen_graph(fn_or_model, input_signature, signature, tf2onnx):
    import tensorflow as tf

    if signature is not None and not isinstance(fn_or_model, (str, os.PathLike)):
        raise ValueError("signature is for a SavedModel directory only")
    trackable = None
    if isinstance(fn_or_model, (str, os.PathLike)):
        trackable, function = _saved_model_signature(fn_or_model, signature)
        if input_signature is not None:
            raise ValueError(
                "a SavedModel signature fixes its inputs: input_signature must be None"
            )
    elif isinstance(fn_or_model, tf.keras.Model):
        trackable = fn_or_model
        function = _keras_function(fn_or_model, input_signature)
    elif hasattr(fn_or_model, "get_concrete_function"):
        if input_signature is None:
            input_signature = fn_or_model.input_signature
        if input_signature is None:
            raise ValueError(
                "the tf.function has no input_signature of its own: pass one"
            )
        function = fn_or_model.get_concrete_function(*input_signature)
    else:
        raise TypeError(
            "fn_or_model must be a tf.function, a Keras model or a SavedModel "
            f"directory, got {type(fn_or_model).__name__}"
        )
    captured = {t.name for t in function.graph.internal_captures}
    input_names = [
        t.name
        for t in function.inputs
        if t.dtype != tf.resource and t.name not in captured
    ]
    output_names = [t.name for t in function.outputs if t.dtype != tf.resource]
    for t in function.inputs:
        if t.name in input_names and t.shape.rank is None:
            raise ExportError(
                f"input {t.name.split(':')[0]!r} has no known rank, which "
                "tf2onnx would declare a scalar: give it one in input_signature "
                "(tf.TensorSpec([None, None]) for any matrix, say)"
            )
    renames = tf2onnx.convert.tensor_names_from_structed(
        function, input_names, output_names
    )
    # Outputs keep the names of a signature's dict or a Keras model's outputs
    # (flattening a dict sorts its keys).
    structured = function.structured_outputs
    if isinstance(structured, dict):
        names = sorted(structured)
    elif isinstance(trackable, tf.keras.Model):
        names = list(trackable.output_names)
    else:
        names = []
    if len(names) == len(output_names):
        renames.update(zip(output_names, names))
    loader = tf2onnx.tf_loader
    if trackable is None:
        graph_def = loader.from_function(function, input_names, output_names)
        tables = None
    else:
        graph_def, tables = loader.from_trackable(
            trackable, function, input_names, output_names, False
        )
    return _Graph(graph_def, input_names, output_names, renames, tables, function.name)


def _saved_model_signature(directory, signature):
    import tensorflow as tf

    directory = os.fspath(directory)
    if not os.path.isfile(os.path.join(directory, "saved_model.pb")):
        raise ExportError(
            f"{directory}: not a SavedModel directory (no saved_model.pb)"
        )
    loaded = tf.saved_model.load(directory)
    name = signature or "serving_default"
    if name not in loaded.signatures:
        raise ExportError(
            f"{directory}: no signature {name!r}; it has "
            f"{sorted(loaded.signatures) or 'none'}"
        )
    return loaded, loaded.signatures[name]


def _keras_function(model, input_signature):
    import tensorflow as tf

    from tensorflow_customops.python.ops import export_util

    if input_signature is None:
        try:
            inputs = model.inputs
        except AttributeError:
            inputs = None
        if not inputs:
            raise ValueError(
                f"Keras model {model.name!r} has no symbolic inputs: pass "
                "input_signature"
            )
        input_signature = [export_util.type_spec(i) for i in inputs]

    @tf.function(input_signature=input_signature, autograph=False)
    def call(*args):
        return model(args[0] if len(args) == 1 else list(args), training=False)

    return call.get_concrete_function()


def _op_types(graph_def, output_names):
    """Op type -> the first node of that type that the outputs depend on, in
    the graph and the functions it calls (control-flow bodies). Nodes only
    reached through control edges (Assert, say) are not converted."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    found = {}
    visited_functions = set()

    def walk(nodes, ends):
        seen = set()
        stack = [end.lstrip("^").split(":")[0] for end in ends]
        while stack:
            name = stack.pop()
            if name in seen or name not in nodes:
                continue
            seen.add(name)
            node = nodes[name]
            found.setdefault(node.op, node.name)
            stack += [i.split(":")[0] for i in node.input if not i.startswith("^")]
            for value in node.attr.values():
                called = [value.func.name] + [f.name for f in value.list.func]
                for function in filter(None, called):
                    if function in functions and function not in visited_functions:
                        visited_functions.add(function)
                        body = functions[function]
                        walk({n.name: n for n in body.node_def}, body.ret.values())

    walk({n.name: n for n in graph_def.node}, output_names)
    return found


def _named(op_types, nodes):
    return ", ".join(f"{op} (node {nodes[op]!r})" for op in op_types)


def _choose_opset(opset, ops, min_opsets):
    import tf2onnx

    needed = {op: min_opsets[op] for op in ops if op in min_opsets}
    if opset is None:
        return max([DEFAULT_OPSET, *needed.values()])
    writable = sorted(
        set(tf2onnx.constants.OPSET_TO_IR_VERSION) | set(_EXTRA_IR_VERSIONS)
    )
    if opset not in writable:
        raise ExportError(
            f"opset {opset}: tf2onnx {tf2onnx.__version__} writes opsets "
            f"{writable[0]} to {writable[-1]}"
        )
    too_low = sorted(op for op, lowest in needed.items() if opset < lowest)
    if too_low:
        raise ExportError(
            f"opset {opset} is too low: "
            + ", ".join(f"{op} needs opset {needed[op]}" for op in too_low)
        )
    return opset


@contextlib.contextmanager
def _fixed_tf2onnx(opset, tf2onnx):
    """tf2onnx 1.17.0 with two tables corrected for the scope: the IR
    version of `opset` where only this module knows it, and bfloat16, which
    it maps to ONNX float16 (a narrower range: silently different values).
    Both tables are left as they were."""
    from onnx import TensorProto
    from tensorflow.core.framework import types_pb2

    ir_versions = tf2onnx.constants.OPSET_TO_IR_VERSION
    dtypes = tf2onnx.tf_utils.TF_TO_ONNX_DTYPE
    added = opset not in ir_versions
    if added:
        ir_versions[opset] = _EXTRA_IR_VERSIONS[opset]
    bfloat16 = dtypes[types_pb2.DT_BFLOAT16]
    dtypes[types_pb2.DT_BFLOAT16] = TensorProto.BFLOAT16
    try:
        yield
    finally:
        dtypes[types_pb2.DT_BFLOAT16] = bfloat16
        if added:
            del ir_versions[opset]


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        message = record.getMessage().splitlines()[0]
        if record.exc_info:
            message += f": {record.exc_info[1]!r}"
        self.messages.append(message)


@contextlib.contextmanager
def _errors_of(logger_name):
    """The first lines of the errors `logger_name` logs in the scope, with
    their exceptions: tf2onnx logs a handler's failure and carries on, leaving
    a node the checker then rejects."""
    collect = _Collect()
    logger = logging.getLogger(logger_name)
    logger.addHandler(collect)
    try:
        yield collect.messages
    finally:
        logger.removeHandler(collect)


def _convert(graph, opset, tf2onnx):
    import tensorflow as tf

    from tensorflow_customops.python.ops import export_util

    with tf.Graph().as_default() as tf_graph:
        tf.import_graph_def(graph.graph_def, name="")
        onnx_graph = tf2onnx.tfonnx.process_tf_graph(
            tf_graph,
            continue_on_error=True,
            opset=opset,
            input_names=graph.input_names,
            output_names=graph.output_names,
            tensors_to_rename=graph.renames,
            initialized_tables=graph.tables,
        )
        # Reshapes whose shape may hold a 0 computed at run time
        # (export_util.LITERAL_ZEROS_RESHAPE) take it literally, as TensorFlow.
        for node in onnx_graph.get_nodes():
            if node.type == "Reshape" and node.name.rsplit("/", 1)[-1].startswith(
                export_util.LITERAL_ZEROS_RESHAPE
            ):
                node.set_attr("allowzero", 1)
        # Without tf2onnx's back-to-back pass, which drops the round trip of
        # Cast(float -> half or bfloat16 -> float) and with it the rounding
        # that tf.cast and the kernels of the narrow dtypes do.
        optimizers = {
            name: optimizer
            for name, optimizer in tf2onnx.optimizer._get_optimizers().items()
            if name != "remove_back_to_back"
        }
        onnx_graph = tf2onnx.optimizer.optimize_graph(
            onnx_graph, catch_errors=True, optimizers=optimizers
        )
        return onnx_graph.make_model(f"converted from {graph.name}")
