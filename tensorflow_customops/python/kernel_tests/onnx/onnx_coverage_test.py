"""Every forward op the library registers (its OpList) has an ONNX handler,
so a new op without one fails here, naming the file to add it to."""

import re
import unittest

from tensorflow_customops.python.onnx import export, handler_util, handlers  # noqa: F401
from tensorflow_customops.python.registry import registered_ops


def _module_name(op):
    name = op[len(handler_util.OP_PREFIX) :]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class OnnxCoverageTest(unittest.TestCase):
    def test_every_forward_op_has_a_handler(self):
        missing = [
            op
            for op in registered_ops()
            if not export.is_gradient_op(op) and op not in handler_util.MIN_OPSETS
        ]
        self.assertEqual(
            missing,
            [],
            f"ops without an ONNX handler: {missing}. Give each a handler in its "
            "family's module in tensorflow_customops/python/onnx/handlers/ ("
            + ", ".join(f"{op}: {_module_name(op)}.py, say" for op in missing)
            + ") with @handler_util.custom_op_handler: exact where ONNX allows, "
            "else one that refuses through handler_util.refuse, saying why "
            '(tools/new_op.py writes one for a new op; docs/onnx.md, "Handlers")',
        )

    def test_handlers_are_of_registered_ops(self):
        registered = set(registered_ops())
        self.assertEqual(sorted(set(handler_util.MIN_OPSETS) - registered), [])

    def test_no_gradient_op_has_a_handler(self):
        # The export refuses gradient ops as such ("inference graphs only").
        self.assertEqual(
            [op for op in handler_util.MIN_OPSETS if export.is_gradient_op(op)], []
        )


if __name__ == "__main__":
    unittest.main()
