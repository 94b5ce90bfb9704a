"""The public API: what `import tensorflow_customops as tfco` offers, and that
its docstring examples run."""

import doctest
import inspect
import sys

import numpy as np
import tensorflow as tf

import tensorflow_customops as tfco


def _exporting_modules():
    """The modules that define an op function of `tfco.__all__` (or are an
    exported module), read from the exports: a new op module is covered as
    soon as its function is exported."""
    modules = set()
    for name in tfco.__all__:
        obj = getattr(tfco, name)
        if inspect.ismodule(obj):
            if obj.__name__.startswith("tensorflow_customops.python.ops."):
                modules.add(obj.__name__)
        elif inspect.isfunction(obj) and obj.__module__.endswith("_ops"):
            modules.add(obj.__module__)
    return sorted(modules)


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
        modules = _exporting_modules()
        self.assertTrue(modules, "no module exports a function of tfco.__all__")
        for name in modules:
            module = sys.modules[name]
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
