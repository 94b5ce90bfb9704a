"""Sizes beyond 2^31 elements and beyond int64, checked at the shape level
without allocating them: shape functions infer huge static shapes (or fail
clearly), and kernels either handle huge empty tensors (a zero dimension makes
any shape free) or reject outputs and index spaces that overflow with
InvalidArgument before allocating anything.

Each op's checks are the large_shapes of its registry entry."""

import tensorflow as tf

from tensorflow_customops.python import registry


class LargeShapesTest(tf.test.TestCase):
    def test_every_registered_op(self):
        for op, entry in sorted(registry.entries().items()):
            with self.subTest(op=op):
                entry.large_shapes(self)


if __name__ == "__main__":
    tf.test.main()
