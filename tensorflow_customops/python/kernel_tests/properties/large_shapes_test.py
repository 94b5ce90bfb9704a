"""Sizes beyond 2^31 elements and beyond int64, checked at the shape level
without allocating them: shape functions infer huge static shapes (or fail
clearly), and kernels either handle huge empty tensors (a zero dimension makes
any shape free) or reject outputs and index spaces that overflow with
InvalidArgument before allocating anything.

Each op's checks are the large_shapes of its registry entry."""

import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python import registry
from tensorflow_customops.python.registry.large_shapes import traced_shapes


class LargeShapesTest(tf.test.TestCase):
    def test_every_registered_op(self):
        for op, entry in sorted(registry.entries().items()):
            with self.subTest(op=op):
                entry.large_shapes(self)

    def test_attr_beyond_int32_is_rejected_when_the_graph_is_built(self):
        # output_size is an int attr read as int32 by the shape function.
        with self.assertRaisesRegex(ValueError, "out of range for an int32"):
            traced_shapes(
                lambda f, r: tfco.roi_align(f, r, 2**31),
                tf.TensorSpec([1, 2, 2, 1], tf.float32),
                tf.TensorSpec([1, 5], tf.float32),
            )


if __name__ == "__main__":
    tf.test.main()
