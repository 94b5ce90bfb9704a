"""The public API: what `import tensorflow_customops as tfco` offers, and that
its docstring examples run."""

import doctest
import inspect

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco
from tensorflow_customops.python.ops import (
    check_numerics_n_ops,
    clip_by_global_norm_ops,
    gradients,
    matrix_mul_ops,
    roi_ops,
    zero_out_ops,
)


class ApiTest(tf.test.TestCase):
    def test_all_names_resolve(self):
        for name in tfco.__all__:
            self.assertTrue(hasattr(tfco, name), name)

    def test_public_functions_are_documented(self):
        for name in tfco.__all__:
            obj = getattr(tfco, name)
            if inspect.isfunction(obj):
                self.assertTrue(inspect.getdoc(obj), f"tfco.{name} has no docstring")

    def test_docstring_examples(self):
        np.set_printoptions(legacy=False)
        for module in [
            check_numerics_n_ops,
            clip_by_global_norm_ops,
            gradients,
            matrix_mul_ops,
            roi_ops,
            zero_out_ops,
        ]:
            result = doctest.testmod(
                module,
                extraglobs={"tfco": tfco, "tf": tf},
                optionflags=doctest.NORMALIZE_WHITESPACE,
                verbose=False,
            )
            self.assertGreater(result.attempted, 0, module.__name__)
            self.assertEqual(result.failed, 0, module.__name__)

    def test_version(self):
        self.assertRegex(tfco.__version__, r"^\d+\.\d+\.\d+")


if __name__ == "__main__":
    tf.test.main()
