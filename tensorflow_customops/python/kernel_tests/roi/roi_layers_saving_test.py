"""A functional model using tfco.layers.RoIAlign, saved as a .keras file and as
a SavedModel and reloaded in a fresh Python: the same outputs, bit for bit.

The model takes the images, their boxes padded to `[N, K, 4]` and the count of
each image's real boxes, and calls the layer as `layer(features, boxes,
box_counts)`.
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
    inputs = [inputs["images"], inputs["boxes"], inputs["counts"]]
    model = keras.saving.load_model(keras_path)
    serving = tf.saved_model.load(saved_model_path)
    np.savez(
        outputs_path,
        keras=np.asarray(model(inputs)),
        saved_model=serving.serve([tf.constant(x) for x in inputs]).numpy(),
    )
    """
)


def _model():
    keras.utils.set_random_seed(1)
    images = keras.Input((16, 16, 3), name="images")
    boxes = keras.Input((None, 4), name="boxes")
    counts = keras.Input((), dtype="int32", name="counts")
    features = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(images)
    pooled = tfco.layers.RoIAlign(4, spatial_scale=0.5, sampling_ratio=2, aligned=True)(
        features, boxes, counts
    )
    scores = keras.layers.Dense(3)(keras.layers.Reshape((-1, 4 * 4 * 8))(pooled))
    return keras.Model([images, boxes, counts], scores)


class RoiLayersSavingTest(tf.test.TestCase):
    def test_reload_in_fresh_process(self):
        model = _model()
        rng = np.random.default_rng(0)
        images = rng.normal(size=(2, 16, 16, 3)).astype(np.float32)
        # Three boxes in image 0 and two in image 1, padded with NaN, which
        # the op would reject were it not skipped.
        boxes = np.array(
            [
                [[1.0, 2.0, 20.0, 25.0], [10.0, 3.0, 18.0, 9.0], [1, 1, 3, 3]],
                [[0.0, 0.0, 31.0, 31.0], [5.5, 7.25, 12.0, 30.0], [np.nan] * 4],
            ],
            np.float32,
        )
        counts = np.array([3, 2], np.int32)
        inputs = [images, boxes, counts]
        expected = np.asarray(model(inputs))
        self.assertEqual(expected.shape, (2, 3, 3))
        self.assertTrue(np.all(np.isfinite(expected)))

        tmp = self.get_temp_dir()
        keras_path = os.path.join(tmp, "roi_model.keras")
        saved_model_path = os.path.join(tmp, "roi_saved_model")
        inputs_path = os.path.join(tmp, "inputs.npz")
        outputs_path = os.path.join(tmp, "outputs.npz")
        model.save(keras_path)
        model.export(saved_model_path, verbose=False)
        np.savez(inputs_path, images=images, boxes=boxes, counts=counts)

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
