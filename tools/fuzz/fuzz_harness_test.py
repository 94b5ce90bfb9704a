"""Tests of the fuzz harness itself: cases come from every OpDef with or
without hints, deterministically, and a crash or a hang in a worker is
caught, pinned to its case, reproduced alone and saved."""

import pickle

import tensorflow as tf

from tensorflow_customops.python import registry
from tensorflow_customops.python.ops import load_library
from tools.fuzz import fuzz, misbehaving_worker, op_cases


def _op_defs():
    return list(load_library.op_list().op)


class GenerationTest(tf.test.TestCase):
    def test_every_op_is_fuzzed_from_its_op_def_alone(self):
        # An op added later has no hint; it must still get generic cases.
        for op_def in _op_defs():
            cases = op_cases.generate(op_def, 10, seed=1, hints={})
            self.assertNotEmpty(cases, op_def.name)
            for case in cases:
                self.assertIn("generic", case.tags)
                self.assertEqual(case.op, op_def.name)

    def test_cases_are_the_same_for_the_same_seed(self):
        op_def = _op_defs()[0]
        first, second = (
            [
                c.describe()
                for c in op_cases.generate(op_def, 20, 7, registry.fuzz_hints())
            ]
            for _ in range(2)
        )
        self.assertEqual(first, second)

    def test_hinted_ops_get_cases_from_their_hints(self):
        # A family gives an op a hint where random shapes would almost never
        # make a valid call (its tests say which ops need one).
        hints = registry.fuzz_hints()
        for op_def in _op_defs():
            if op_def.name in hints:
                cases = op_cases.generate(op_def, 10, seed=1, hints=hints)
                hinted = [c for c in cases if "hinted" in c.tags]
                self.assertTrue(hinted, op_def.name)
                names = {arg.name for arg in op_def.input_arg}
                for case in hinted:
                    self.assertEqual(set(case.inputs), names, op_def.name)


class HarnessTest(tf.test.TestCase):
    def test_crash_and_hang_are_caught_and_pinned_to_their_case(self):
        profile = fuzz.Profile(cases_per_op=6, seconds_per_op=120, case_timeout_s=10)
        artifacts = self.get_temp_dir()
        fuzzer = fuzz.Fuzzer(
            profile, artifacts, worker_module=misbehaving_worker.__name__
        )
        report = fuzzer.fuzz_op(_op_defs()[0].name, seed=0)

        self.assertEqual(report.cases, 6)  # The cases after each failure ran too.
        self.assertEqual(report.outcomes["crash"], 1)
        self.assertEqual(report.outcomes["hang"], 1)
        failures = {f.outcome: f for f in report.failures}
        self.assertEqual(failures["crash"].case.index, misbehaving_worker.CRASHING_CASE)
        self.assertEqual(failures["hang"].case.index, misbehaving_worker.HANGING_CASE)
        for failure in report.failures:
            self.assertTrue(failure.reproduces_alone)
            with open(failure.saved_to, "rb") as f:
                self.assertEqual(pickle.load(f).describe(), failure.case.describe())
        self.assertIn("signal 6", failures["crash"].detail)
        self.assertIn(
            "bazel run //tools/fuzz:fuzz -- --replay=",
            failures["crash"].describe(),
        )


if __name__ == "__main__":
    tf.test.main()
