"""The two-stage detector example: it learns under `fit` with shuffling (also
its DCNv2 variant, with a deformable convolution), trains
under `mixed_bfloat16`, and its SavedModel reloads in a fresh Python with the
same outputs, bit for bit."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import tensorflow as tf

from examples import two_stage_detector as detector

# Runs in a new interpreter: the SavedModel needs the ops registered, which
# importing the package does.
_RELOAD = textwrap.dedent(
    """
    import sys

    import numpy as np
    import tensorflow as tf

    import tensorflow_customops  # noqa: F401

    saved_model_path, inputs_path, outputs_path = sys.argv[1:]
    inputs = np.load(inputs_path)
    loaded = tf.saved_model.load(saved_model_path)
    outputs = loaded.serve(
        [inputs["images"], inputs["proposals"], inputs["proposal_counts"]]
    )
    np.savez(outputs_path, **{name: t.numpy() for name, t in outputs.items()})
    """
)


class TwoStageDetectorTest(tf.test.TestCase):
    def tearDown(self):
        keras.mixed_precision.set_global_policy("float32")
        super().tearDown()

    def test_data(self):
        x, y, weights = detector.synthetic_data(32, seed=0)
        counts = x["proposal_counts"]
        self.assertAllInRange(
            counts,
            detector.PROPOSALS_PER_OBJECT + detector.BACKGROUND_PROPOSALS,
            detector.MAX_PROPOSALS,
        )
        valid = weights["class_logits"] > 0
        self.assertAllEqual(valid.sum(1), counts)
        labels = y["class_logits"]
        self.assertAllEqual(np.unique(labels[valid]), [0, 1, 2])
        self.assertAllEqual(labels[~valid], np.zeros_like(labels[~valid]))
        self.assertAllEqual(weights["box_deltas"] > 0, labels > 0)

    def test_fit_learns(self):
        self._check_fit_learns(deformable=False)

    def test_deformable_variant_fit_learns(self):
        model = self._check_fit_learns(deformable=True)
        layer = next(
            layer
            for layer in model.layers
            if isinstance(layer, detector.tfco.layers.DeformConv2D)
        )
        # The offsets start at zero: training moved them.
        self.assertGreater(np.abs(layer.offset_kernel.numpy()).max(), 0)

    def _check_fit_learns(self, deformable):
        train = detector.synthetic_data(192, seed=1)
        test = detector.synthetic_data(64, seed=2)
        model = detector.compile_model(detector.build_model(deformable=deformable))
        before = detector.accuracy(model, test)
        history = model.fit(
            detector.dataset(train, batch_size=16, shuffle_seed=3), epochs=4, verbose=0
        )
        losses = history.history["loss"]
        self.assertLess(losses[-1], 0.6 * losses[0])
        # Background, square and cross proposals are about equally common.
        after = detector.accuracy(model, test)
        self.assertGreater(after, 0.75)
        self.assertGreater(after, before + 0.2)
        return model

    def test_mixed_bfloat16(self):
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        model = detector.compile_model(detector.build_model())
        pooler = next(
            layer
            for layer in model.layers
            if isinstance(layer, detector.tfco.layers.MultiScaleRoIAlign)
        )
        self.assertEqual(pooler.compute_dtype, "bfloat16")
        self.assertEqual(pooler.output.dtype, "bfloat16")
        train = detector.synthetic_data(96, seed=4)
        history = model.fit(
            detector.dataset(train, batch_size=16, shuffle_seed=5), epochs=3, verbose=0
        )
        losses = history.history["loss"]
        self.assertTrue(np.all(np.isfinite(losses)), losses)
        self.assertLess(losses[-1], 0.8 * losses[0])

    def test_saved_model_reloads_in_a_fresh_process(self):
        model = detector.compile_model(detector.build_model())
        train = detector.synthetic_data(32, seed=6)
        model.fit(detector.dataset(train, batch_size=16), verbose=0)
        x, _, _ = detector.synthetic_data(8, seed=7)
        expected = model.predict(x, verbose=0)

        directory = self.get_temp_dir()
        saved_model_path = os.path.join(directory, "detector")
        model.export(saved_model_path, verbose=False)
        inputs_path = os.path.join(directory, "inputs.npz")
        outputs_path = os.path.join(directory, "outputs.npz")
        np.savez(inputs_path, **x)
        subprocess.run(
            [
                sys.executable,
                "-c",
                _RELOAD,
                saved_model_path,
                inputs_path,
                outputs_path,
            ],
            check=True,
            timeout=300,
        )
        reloaded = np.load(outputs_path)
        self.assertEqual(sorted(reloaded.files), sorted(expected))
        for name, value in expected.items():
            self.assertAllEqual(reloaded[name], value)


if __name__ == "__main__":
    tf.test.main()
