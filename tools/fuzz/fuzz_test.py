"""Fuzzes every op the library registers with the quick profile (what CI
runs): no crash, hang, sanitizer report or other failure is allowed, and
every op must be fuzzed, with cases that run and cases that are rejected."""

import os

import tensorflow as tf

from tensorflow_customops.python.ops import load_library
from tools.fuzz import fuzz


class FuzzQuickProfileTest(tf.test.TestCase):
    def test_every_op_survives_the_quick_profile(self):
        op_names = [op.name for op in load_library.op_list().op]
        artifacts = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or self.get_temp_dir()
        reports = fuzz.Fuzzer(fuzz.PROFILES["quick"], artifacts).run(
            op_names, seed=0, jobs=2
        )
        print(fuzz.format_table(reports), flush=True)

        self.assertEqual([r.op for r in reports], op_names, "some ops were not fuzzed")
        for report in reports:
            self.assertGreater(
                report.outcomes["result"], 0, f"{report.op}: nothing ran"
            )
            self.assertGreater(
                report.outcomes["error"], 0, f"{report.op}: nothing rejected"
            )
        failures = [f.describe() for r in reports for f in r.failures]
        self.assertEmpty(failures, "\n\n".join(failures))


if __name__ == "__main__":
    tf.test.main()
