"""A detector's SavedModel, RoI Align with box_counts, served from a C++
program through TensorFlow's C API (loading:saved_model_run): without the op
library it fails to load naming the op, and after TF_LoadLibrary of the op
library it gives Python's numbers bit for bit."""

import os
import subprocess

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import tensorflow_customops as tfco

_RUNNER = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "loading",
    "saved_model_run",
)


class _Detector(tf.Module):
    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 6, 6, 2], tf.float32),
            tf.TensorSpec([None, None, 4], tf.float32),
            tf.TensorSpec([None], tf.int32),
        ]
    )
    def serve(self, features, boxes, box_counts):
        return {"pooled": tfco.roi_align(features, boxes, 2, box_counts=box_counts)}


class RoiCApiTest(tf.test.TestCase):
    def test_served_from_c_api(self):
        export_dir = os.path.join(self.get_temp_dir(), "detector")
        module = _Detector()
        tf.saved_model.save(module, export_dir, signatures=module.serve)
        rng = np.random.default_rng(0)
        inputs = {
            "features": rng.normal(size=[2, 6, 6, 2]).astype(np.float32),
            "boxes": np.sort(rng.uniform(0, 6, size=[2, 3, 2, 2]), axis=2)
            .transpose(0, 1, 3, 2)
            .reshape(2, 3, 4)
            .astype(np.float32),
            "box_counts": np.array([3, 1], np.int32),
        }
        expected = module.serve(**inputs)["pooled"].numpy()
        self.assertEqual(np.count_nonzero(expected[1, 1:]), 0)

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
        out_path = os.path.join(self.get_temp_dir(), "pooled")
        args.append(f"--output={signature.outputs['pooled'].name}:{out_path}")

        def run(*extra):
            return subprocess.run(
                [*args, *extra],
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                capture_output=True,
                text=True,
            )

        missing = run()
        self.assertEqual(missing.returncode, 1, missing.stderr)
        # The first of the model's ops the binary meets: the box counts' check
        # or the pooling.
        self.assertRegex(
            missing.stderr,
            "Op type not registered 'CustomOps>(RoiBoxCounts|RoiAlign)'",
        )

        served = run(f"--library={tfco.build_info()['op_library']}")
        self.assertEqual(served.returncode, 0, served.stderr)
        self.assertEqual(served.stdout.strip(), "x".join(map(str, expected.shape)))
        got = np.fromfile(out_path, np.float32).reshape(expected.shape)
        self.assertAllEqual(got, expected)


if __name__ == "__main__":
    tf.test.main()
