"""Conventions every op in the library must follow. It reads the library's own
OpList, so ops added later are checked without editing this file."""

import re

import tensorflow as tf
from tensorflow.python.framework import ops as framework_ops

import tensorflow_customops  # noqa: F401  (registers the Python gradients)
from tensorflow_customops.python import registry
from tensorflow_customops.python.ops import load_library

_PREFIX = "CustomOps>"


def _library_ops():
    return list(load_library.op_list().op)


class OpRegistryTest(tf.test.TestCase):
    def test_library_registers_ops(self):
        self.assertNotEmpty(_library_ops())

    def test_names_are_prefixed_camel_case(self):
        for op_def in _library_ops():
            self.assertRegex(
                op_def.name, "^" + re.escape(_PREFIX) + "[A-Z][A-Za-z0-9]*$"
            )

    def test_ops_are_documented(self):
        for op_def in _library_ops():
            self.assertTrue(op_def.summary, f"{op_def.name} has no .Doc() summary")
            for arg in list(op_def.input_arg) + list(op_def.output_arg):
                self.assertTrue(
                    arg.description, f"{op_def.name}: argument {arg.name} undocumented"
                )

    def test_every_op_has_a_python_gradient(self):
        # tf.no_gradient would make second-order gradients silently None: a
        # gradient op gets a gradient of its own, or one that raises.
        for op_def in _library_ops():
            try:
                grad_fn = framework_ops._gradient_registry.lookup(op_def.name)
            except LookupError:
                self.fail(f"{op_def.name} has no tf.RegisterGradient")
            self.assertIsNotNone(grad_fn, f"{op_def.name} is tf.no_gradient")

    def test_type_attrs_have_restrictions(self):
        # An unrestricted type attr would accept dtypes no kernel is built for.
        for op_def in _library_ops():
            for attr in op_def.attr:
                if attr.type in ("type", "list(type)"):
                    self.assertTrue(
                        attr.allowed_values.list.type,
                        f"{op_def.name}: attr {attr.name} allows every dtype",
                    )

    def test_ops_are_stateless(self):
        for op_def in _library_ops():
            stateful = bool(registry.entries()[op_def.name].stateful)
            self.assertEqual(op_def.is_stateful, stateful, op_def.name)


if __name__ == "__main__":
    tf.test.main()
