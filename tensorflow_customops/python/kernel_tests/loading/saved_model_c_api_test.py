"""A SavedModel that uses the ops (a registry case's), served from a C++ program through
TensorFlow's C API (saved_model_run): without the op library it fails to load
naming the op, and after TF_LoadLibrary of the op library it gives Python's
numbers bit for bit."""

import os

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python import registry
from tensorflow_customops.python.kernel_tests.loading import c_api_serving


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

        run, out_path = c_api_serving.runner(
            export_dir, inputs, "y", self.get_temp_dir()
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
