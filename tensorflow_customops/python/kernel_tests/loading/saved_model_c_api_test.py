"""A SavedModel that uses the ops (a registry case's), served from a C++ program through
TensorFlow's C API (saved_model_run): without the op library it fails to load
naming the op, and after TF_LoadLibrary of the op library it gives Python's
numbers bit for bit."""

import os
import subprocess

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import tensorflow_customops as tfco
from tensorflow_customops.python import registry

_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_model_run")


class SavedModelCApiTest(tf.test.TestCase):
    def test_served_from_c_api(self):
        # A function of the library's ops, from the registry, and its inputs.
        case = registry.a_case()
        tensors, _ = case.tensors(tf.float32)
        inputs = {f"x{i}": t.numpy() for i, t in enumerate(tensors)}
        specs = [
            tf.TensorSpec(t.shape, t.dtype, name=n) for n, t in zip(inputs, tensors)
        ]

        class Model(tf.Module):
            @tf.function(input_signature=specs)
            def serve(self, *args):
                output = tf.nest.flatten(case.forward(*args))[0]
                return {"y": tf.cast(output, tf.float32)}

        export_dir = os.path.join(self.get_temp_dir(), "model")
        module = Model()
        tf.saved_model.save(module, export_dir, signatures=module.serve)
        expected = module.serve(*tensors)["y"].numpy()

        saved_model = saved_model_pb2.SavedModel()
        with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
            saved_model.ParseFromString(f.read())
        signature = saved_model.meta_graphs[0].signature_def["serving_default"]
        args = [_RUNNER, f"--export_dir={export_dir}"]
        for name, value in inputs.items():
            path = os.path.join(self.get_temp_dir(), name)
            value.tofile(path)
            shape = "x".join(map(str, value.shape))
            args.append(
                f"--input={signature.inputs[name].name}:{value.dtype}:{shape}:{path}"
            )
        out_path = os.path.join(self.get_temp_dir(), "y")
        args.append(f"--output={signature.outputs['y'].name}:{out_path}")

        def run(*extra):
            return subprocess.run(
                [*args, *extra],
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                capture_output=True,
                text=True,
            )

        missing = run()
        self.assertEqual(missing.returncode, 1, missing.stderr)
        self.assertRegex(missing.stderr, r"Op type not registered 'CustomOps>\w+'")

        served = run(f"--library={tfco.build_info()['op_library']}")
        self.assertEqual(served.returncode, 0, served.stderr)
        self.assertEqual(served.stdout.strip(), "x".join(map(str, expected.shape)))
        got = np.fromfile(out_path, np.float32).reshape(expected.shape)
        self.assertAllEqual(got, expected)


if __name__ == "__main__":
    tf.test.main()
