"""A functional model using tfco.layers.RoIAlign, saved as a .keras file and as
a SavedModel and reloaded in a fresh Python: the same outputs, bit for bit.

The model takes the images and the `[K, 5]` rois as two inputs with unrelated
leading dimensions (K boxes over N images), and is called directly.
"""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco

# Runs in a new interpreter: only `import tensorflow_customops` registers the
# layers (for the .keras file) and the ops (for the SavedModel); before it,
# loading the .keras file must fail on the unknown layer.
_RELOAD = textwrap.dedent(
    """
    import sys

    import keras
    import numpy as np
    import tensorflow as tf

    keras_path, saved_model_path, inputs_path, outputs_path = sys.argv[1:]
    try:
        keras.saving.load_model(keras_path)
        sys.exit("loaded without tensorflow_customops")
    except TypeError as error:
        assert "tfco>RoIAlign" in str(error), error

    import tensorflow_customops  # noqa: E402, F401

    inputs = np.load(inputs_path)
    images, rois = inputs["images"], inputs["rois"]
    model = keras.saving.load_model(keras_path)
    serving = tf.saved_model.load(saved_model_path)
    np.savez(
        outputs_path,
        keras=np.asarray(model([images, rois])),
        saved_model=serving.serve([tf.constant(images), tf.constant(rois)]).numpy(),
    )
    """
)


def _model():
    keras.utils.set_random_seed(1)
    images = keras.Input((16, 16, 3), name="images")
    rois = keras.Input((5,), batch_size=None, name="rois")
    features = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(images)
    pooled = tfco.layers.RoIAlign(4, spatial_scale=0.5, sampling_ratio=2, aligned=True)(
        [features, rois]
    )
    scores = keras.layers.Dense(3)(keras.layers.Flatten()(pooled))
    return keras.Model([images, rois], scores)


class RoiLayersSavingTest(tf.test.TestCase):
    def test_reload_in_fresh_process(self):
        model = _model()
        rng = np.random.default_rng(0)
        images = rng.normal(size=(2, 16, 16, 3)).astype(np.float32)
        # Five boxes over two images: K differs from the image batch.
        rois = np.array(
            [
                [0, 1.0, 2.0, 20.0, 25.0],
                [1, 0.0, 0.0, 31.0, 31.0],
                [1, 5.5, 7.25, 12.0, 30.0],
                [0, 10.0, 3.0, 18.0, 9.0],
                [1, 2.0, 2.0, 3.0, 3.0],
            ],
            np.float32,
        )
        expected = np.asarray(model([images, rois]))
        self.assertEqual(expected.shape, (5, 3))

        tmp = self.get_temp_dir()
        keras_path = os.path.join(tmp, "roi_model.keras")
        saved_model_path = os.path.join(tmp, "roi_saved_model")
        inputs_path = os.path.join(tmp, "inputs.npz")
        outputs_path = os.path.join(tmp, "outputs.npz")
        model.save(keras_path)
        model.export(saved_model_path, verbose=False)
        np.savez(inputs_path, images=images, rois=rois)

        # Inherits PYTHONPATH, which points at Bazel's runfiles.
        result = subprocess.run(
            [sys.executable, "-c", _RELOAD]
            + [keras_path, saved_model_path, inputs_path, outputs_path],
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            capture_output=True,
            text=True,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        outputs = np.load(outputs_path)
        self.assertTrue(np.array_equal(outputs["keras"], expected))
        self.assertTrue(np.array_equal(outputs["saved_model"], expected))


if __name__ == "__main__":
    tf.test.main()
