"""The ragged-boxes example: its rows are the boxes of each image in turn,
`fit` trains it on shuffled ragged batches, and `predict` gives a row per
proposal."""

import keras
import numpy as np
import tensorflow as tf

from examples import ragged_boxes


class RaggedBoxesTest(tf.test.TestCase):
    def test_rows_are_the_boxes_image_after_image(self):
        # A batch gives, row for row, what each image gives on its own.
        x, _, _ = ragged_boxes.ragged_data(5, seed=3)
        model = ragged_boxes.build_model()
        batched = model(x)
        counts = x["proposals"].row_lengths().numpy()
        self.assertEqual(batched["class_logits"].shape, [counts.sum(), 3])
        self.assertEqual(batched["box_deltas"].shape, [counts.sum(), 4])
        alone = [
            model(
                {
                    "images": x["images"][i : i + 1],
                    "proposals": x["proposals"][i : i + 1],
                }
            )
            for i in range(5)
        ]
        for name in ("class_logits", "box_deltas"):
            self.assertAllClose(
                batched[name],
                np.concatenate([a[name] for a in alone]),
                rtol=1e-5,
                atol=1e-6,
            )

    def test_fit_learns(self):
        train = ragged_boxes.ragged_data(96, seed=1)
        model = ragged_boxes.compile_model(ragged_boxes.build_model())
        before = ragged_boxes.accuracy(model, train)
        history = model.fit(
            ragged_boxes.dataset(train, 16, shuffle_seed=0), epochs=3, verbose=0
        )
        losses = history.history["loss"]
        self.assertTrue(np.all(np.isfinite(losses)), losses)
        self.assertLess(losses[-1], losses[0])
        self.assertGreater(ragged_boxes.accuracy(model, train), before)

    def test_saves_and_reloads(self):
        x, _, _ = ragged_boxes.ragged_data(3, seed=4)
        model = ragged_boxes.build_model()
        path = f"{self.get_temp_dir()}/model.keras"
        model.save(path)
        reloaded = keras.models.load_model(path)
        for name, value in model(x).items():
            self.assertAllEqual(reloaded(x)[name], value)


if __name__ == "__main__":
    tf.test.main()
