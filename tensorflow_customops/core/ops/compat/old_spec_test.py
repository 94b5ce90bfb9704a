"""Synthetic old specs: a NodeDef written against each historical OpDef,
with only the attrs that existed then, runs like the current op with every
attr explicit (new ones at their defaults)."""

import tensorflow as tf

from tensorflow_customops.core.ops.compat import goldens
from tensorflow_customops.python.ops import load_library


class OldSpecTest(tf.test.TestCase):
    def test_old_specs_run_like_current_with_explicit_defaults(self):
        current = {op.name: op for op in load_library.op_list().op}
        for name, versions in sorted(goldens.read_history().items()):
            now = current[name]
            defaults = {
                a.name: a.default_value for a in now.attr if a.HasField("default_value")
            }
            for version, old in enumerate(versions, start=1):
                with self.subTest(op=name, version=version):
                    old_cases = goldens.cases(old)
                    old_golden = goldens.build(old, old_cases)
                    new_golden = goldens.build(
                        now,
                        [(case, {**defaults, **attrs}) for case, attrs in old_cases],
                    )
                    for golden, spec in ((old_golden, old), (new_golden, now)):
                        for node in golden.graph_def.node:
                            if node.op == name:
                                self.assertEqual(
                                    set(node.attr), {a.name for a in spec.attr}
                                )
                    old_out, graph = goldens.run_v1(
                        old_golden.graph_def, old_golden.feeds, old_golden.fetches
                    )
                    new_out, _ = goldens.run_v1(
                        new_golden.graph_def, new_golden.feeds, new_golden.fetches
                    )
                    self.assertEqual(old_golden.fetches, new_golden.fetches)
                    for fetch in old_golden.fetches:
                        self.assertAllEqual(old_out[fetch], new_out[fetch], msg=fetch)
                    # Importing filled the attrs added since with their defaults.
                    added = set(defaults) - {a.name for a in old.attr}
                    for op in graph.get_operations():
                        if op.type == name:
                            for attr in added:
                                self.assertEqual(op.node_def.attr[attr], defaults[attr])


if __name__ == "__main__":
    tf.test.main()
