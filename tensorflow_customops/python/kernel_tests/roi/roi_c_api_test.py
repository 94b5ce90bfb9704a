"""A detector's SavedModel, RoI Align with box_counts, served from a C++
program through TensorFlow's C API (loading:saved_model_run): without the op
library it fails to load naming the op, and after TF_LoadLibrary of the op
library it gives Python's numbers bit for bit."""

import os

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.kernel_tests.loading import c_api_serving


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

        run, out_path = c_api_serving.runner(
            export_dir, inputs, "pooled", self.get_temp_dir()
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
