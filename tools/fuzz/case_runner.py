"""The fuzzer's worker process: runs cases one at a time and reports each.

`python -m tools.fuzz.case_runner` reads pickled cases
from stdin and writes one result per case to its stdout, each as a frame (8
byte length, then the pickle). Anything else the process prints goes to
stderr, which the parent keeps as the worker's log, with a marker line before
every case so that a sanitizer report or a crash message can be traced to it.

Each case runs twice: in a graph, so the op's shape function sees the inputs
(constants, so shape functions that read values run too), and eagerly, so the
kernel runs. A result or a TensorFlow error is a pass; an output whose shape
contradicts the shape function, or any other exception, is a failure. Crashes
and hangs are caught by the parent.
"""

import argparse
import os
import pickle
import resource
import struct
import sys
import time
import traceback

_LENGTH = struct.Struct("<Q")
CASE_MARKER = "[fuzz-case]"


def write_frame(stream, message):
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read_exactly(stream, size):
    """`size` bytes, fewer only at end of stream (an unbuffered `stream` may
    return less per read)."""
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def read_frame(stream):
    """The next message from `stream`, or None at end of stream."""
    header = _read_exactly(stream, _LENGTH.size)
    if len(header) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(header)
    data = _read_exactly(stream, length)
    return pickle.loads(data) if len(data) == length else None


def _flat(value):
    return value if isinstance(value, list) else [value]


def _tensor(value):
    import tensorflow as tf

    from tensorflow_customops.python.registry import arrays

    if not isinstance(value, arrays.ZeroSized):
        return tf.constant(value)
    dtype = tf.as_dtype(value.dtype_enum)
    if tf.executing_eagerly():
        return tf.zeros(value.shape, dtype)
    # In a graph, tf.zeros truncates dimensions above 2**31 to int32 in its
    # shape tensor; a placeholder keeps the exact static shape.
    return tf.compat.v1.placeholder(dtype, value.shape)


def _inferred_attrs(op_def):
    """Attrs that graph construction infers from the inputs."""
    names = set()
    for arg in op_def.input_arg:
        names.update(filter(None, (arg.type_attr, arg.type_list_attr, arg.number_attr)))
    return names


def _output_count(op_def, attrs):
    count = 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            # An out-of-range N is rejected before any output is made.
            count += min(max(attrs.get(arg.number_attr, 1), 0), 64)
        elif arg.type_list_attr:
            count += len(attrs.get(arg.type_list_attr, []))
        else:
            count += 1
    return count


def _run_in_graph(op_def, case):
    """The static output shapes from the op's shape function, or None where
    graph construction rejects the case."""
    import tensorflow as tf
    from tensorflow.python.framework import op_def_library

    inferred = _inferred_attrs(op_def)
    with tf.Graph().as_default():
        kwargs = {
            name: [_tensor(a) for a in value]
            if isinstance(value, list)
            else _tensor(value)
            for name, value in case.inputs.items()
        }
        kwargs.update({k: v for k, v in case.attrs.items() if k not in inferred})
        try:
            _, _, op, _ = op_def_library._apply_op_helper(op_def.name, **kwargs)
        except (TypeError, ValueError, tf.errors.OpError):
            return None
        return [output.shape for output in op.outputs]


def _run_eagerly(op_def, case):
    from tensorflow.python.eager import context, execute

    inputs = []
    for arg in op_def.input_arg:
        inputs += [_tensor(a) for a in _flat(case.inputs.get(arg.name, []))]
    attrs = []
    for name, value in case.attrs.items():
        attrs += [name, value]
    return execute.execute(
        op_def.name,
        _output_count(op_def, case.attrs),
        inputs,
        tuple(attrs),
        context.context(),
    )


def run_case(op_defs, case):
    """Runs `case` on the CPU; returns {"outcome": ..., "detail": ...}.

    Outcomes: "result", "error" (passes) or "shape_mismatch",
    "unexpected_exception" (failures).
    """
    import tensorflow as tf

    op_def = op_defs[case.op]
    try:
        with tf.device("/cpu:0"):
            static_shapes = _run_in_graph(op_def, case)
            outputs = _run_eagerly(op_def, case)
    except (tf.errors.OpError, TypeError, ValueError) as e:
        message = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        return {"outcome": "error", "detail": f"{type(e).__name__}: {message}"}
    except Exception:  # noqa: BLE001  (anything else is a failure to report)
        return {"outcome": "unexpected_exception", "detail": traceback.format_exc()}
    shapes = [tuple(output.shape) for output in outputs]
    if static_shapes is not None:
        for i, (static, actual) in enumerate(zip(static_shapes, shapes)):
            if not static.is_compatible_with(actual):
                detail = f"output {i}: shape function {static}, kernel {actual}"
                return {"outcome": "shape_mismatch", "detail": detail}
    return {"outcome": "result", "detail": str(shapes)[:300]}


def limit_memory(limit_mb):
    """Caps the address space, so that a case asking for a huge allocation
    gets TensorFlow's ResourceExhausted error instead of the OOM killer.
    Under ASan, whose shadow memory needs terabytes of address space, the
    parent sets ASan's own allocation limit instead."""
    if limit_mb and "libasan" not in os.environ.get("LD_PRELOAD", ""):
        limit = limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _fuzz(request, op_defs, protocol, run):
    """Generates the cases of request["op"] and runs them in order from
    request["skip"], for at most request["seconds"]; reports each case before
    running it, so that the parent knows which one a crash belongs to."""
    from tensorflow_customops.python import registry
    from tools.fuzz import op_cases

    cases = op_cases.generate(
        op_defs[request["op"]], request["count"], request["seed"], registry.fuzz_hints()
    )
    stop = time.monotonic() + request["seconds"]
    for case in cases[request["skip"] :]:
        if time.monotonic() > stop:
            break
        write_frame(protocol, ("case", case))
        _run_one(op_defs, case, protocol, run)
    write_frame(protocol, ("done", None))


def _run_one(op_defs, case, protocol, run):
    sys.stderr.write(f"\n{CASE_MARKER} {case.op} {case.index}\n")
    sys.stderr.flush()
    write_frame(protocol, ("result", run(op_defs, case)))


def serve(run=run_case, argv=None):
    """The worker loop. A request is either a Case, run and answered with
    ("result", ...), or a dict asking to fuzz one op (see _fuzz); `run(op_defs,
    case)` runs each case."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-limit-mb", type=int, default=0)
    args = parser.parse_args(argv)
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # Stray output from C++ or Python must not corrupt the frames.
    limit_memory(args.memory_limit_mb)

    import tensorflow_customops  # noqa: F401  (loads the library)
    from tensorflow_customops.python.ops import load_library

    op_defs = {op.name: op for op in load_library.op_list().op}
    write_frame(protocol, ("ready", None))
    while True:
        request = read_frame(sys.stdin.buffer)
        if request is None:
            return
        if isinstance(request, dict):
            _fuzz(request, op_defs, protocol, run)
        else:
            _run_one(op_defs, request, protocol, run)


if __name__ == "__main__":
    serve()
