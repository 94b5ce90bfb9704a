"""Runs a saved SavedModel through saved_model_run (TensorFlow's C API, as a C
or C++ program serves it), for the tests that check a model of our ops
serves outside Python."""

import os
import subprocess

from tensorflow.core.protobuf import saved_model_pb2

_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_model_run")


def runner(export_dir, inputs, output, scratch):
    """Writes `inputs` (signature key -> array) into `scratch` and returns
    (run, out_path): run(*extra_flags) serves the "serving_default" signature
    and writes its `output` to out_path, as float32 bytes."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    signature = saved_model.meta_graphs[0].signature_def["serving_default"]
    args = [_RUNNER, f"--export_dir={export_dir}"]
    for name, value in inputs.items():
        path = os.path.join(scratch, name)
        value.tofile(path)
        shape = "x".join(map(str, value.shape))
        args.append(
            f"--input={signature.inputs[name].name}:{value.dtype}:{shape}:{path}"
        )
    out_path = os.path.join(scratch, output)
    args.append(f"--output={signature.outputs[output].name}:{out_path}")

    def run(*extra):
        return subprocess.run(
            [*args, *extra],
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            capture_output=True,
            text=True,
        )

    return run, out_path
