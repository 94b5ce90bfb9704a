"""The two-stage detector exported to ONNX and run in ONNX Runtime: its
outputs are TensorFlow's within ONNX_TOLERANCE (the RoI pooling is exact; the
convolutions and dense layers sum in another order), for any number of images
and of proposals per image."""

import os

import keras
import numpy as np
import onnxruntime
import tensorflow as tf

from examples import two_stage_detector as detector


class TwoStageDetectorOnnxTest(tf.test.TestCase):
    def tearDown(self):
        keras.backend.clear_session()
        super().tearDown()

    def assert_exports(self, model):
        onnx_model = detector.export_onnx(model)
        for images, seed in ((5, 2), (1, 3)):
            x, _, _ = detector.synthetic_data(images, seed)
            # Some images with fewer real proposals, one with none.
            x["proposal_counts"] = np.minimum(
                x["proposal_counts"], np.arange(images) * 3
            ).astype(np.int32)
            differences = detector.onnx_differences(model, onnx_model, x)
            self.assertLessEqual(max(differences.values()), detector.ONNX_TOLERANCE)

    def test_trained_model(self):
        path = os.path.join(self.get_temp_dir(), "detector.onnx")
        # --export-onnx after a short training: exits if ORT differs.
        detector.main(
            ["--images=32", "--epochs=1", "--batch_size=16", f"--export-onnx={path}"]
        )
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        x, _, _ = detector.synthetic_data(3, seed=4)
        inputs = [x["images"], x["proposals"], x["proposal_counts"]]
        outputs = session.run(
            None, {i.name: v for i, v in zip(session.get_inputs(), inputs)}
        )
        self.assertEqual(
            [o.shape for o in outputs],
            [
                (3, detector.MAX_PROPOSALS, len(detector.CLASSES)),
                (3, detector.MAX_PROPOSALS, 4),
            ],
        )

    def test_dynamic_batch_and_proposal_counts(self):
        self.assert_exports(detector.build_model(seed=1))

    def test_deformable(self):
        self.assert_exports(detector.build_model(seed=1, deformable=True))


if __name__ == "__main__":
    tf.test.main()
