"""CPU kernels are parallel and still bitwise deterministic: every op's
forward and backward give the same bits for 1, 2 and 4 intra-op threads and
across runs. Thread counts are fixed at TensorFlow start-up, so each count
runs in its own process. The registry's property cases (property_cases.py)
cover every registered op."""

import json
import os
import subprocess
import sys

import tensorflow as tf

from tensorflow_customops.python import registry
from tensorflow_customops.python.kernel_tests.properties import property_cases

# (op, dtype) pairs whose CPU results may differ across intra-op thread
# counts, with the reason, from the entries' thread_count_dependent; a case is
# matched by the op it runs and the dtype its name ends with. Listing a pair
# that turns out deterministic fails the test, so an entry cannot outlive its
# reason.
KNOWN_THREAD_COUNT_DEPENDENT = {
    (op, dtype): reason
    for op, entry in registry.entries().items()
    for dtype, reason in entry.thread_count_dependent.items()
}

THREAD_COUNTS = (1, 2, 4)

# Evaluates every case twice on seed-0 inputs and prints one digest per case.
_CHILD = """
import hashlib, json, sys
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
from tensorflow_customops.python.kernel_tests.properties import property_cases

out = {}
for case in property_cases.all_cases():
    inputs = case.make_inputs(0)
    digests = set()
    for _ in range(2):
        outputs = property_cases.evaluate(case, inputs)
        data = b"".join(t.numpy().tobytes() for t in outputs)
        digests.add(hashlib.sha256(data).hexdigest())
    assert len(digests) == 1, f"{case.name}: two runs in one process differ"
    out[case.name] = digests.pop()
print(json.dumps(out))
"""


def _run_children():
    """{threads: {case name: digest}}; the processes run side by side."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    children = {
        threads: subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(threads)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for threads in THREAD_COUNTS
    }
    runs = {}
    for threads, child in children.items():
        stdout, stderr = child.communicate()
        if child.returncode != 0:
            raise AssertionError(f"{threads} threads: {stderr[-3000:]}")
        runs[threads] = json.loads(stdout.strip().splitlines()[-1])
    return runs


class DeterminismTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ops_by_case = {
            case.name: property_cases.ops_run_by(case)
            for case in property_cases.all_cases()
        }

    def test_every_registered_op_has_a_case(self):
        covered = set().union(*self.ops_by_case.values())
        self.assertEqual(
            sorted(set(registry.registered_ops()) - covered),
            [],
            property_cases.UNCOVERED_MESSAGE,
        )

    def test_same_bits_for_every_thread_count(self):
        runs = _run_children()
        reference = runs[THREAD_COUNTS[0]]
        self.assertCountEqual(reference, self.ops_by_case)
        # case name -> the thread counts whose bits differ from 1 thread's
        differing = {
            name: [t for t in THREAD_COUNTS[1:] if runs[t][name] != digest]
            for name, digest in reference.items()
        }
        exempt = set()
        for (op, dtype), reason in KNOWN_THREAD_COUNT_DEPENDENT.items():
            cases = [
                name
                for name, ops in self.ops_by_case.items()
                if op in ops and name.endswith("_" + dtype)
            ]
            self.assertNotEqual(cases, [], f"{op} {dtype}: no case runs it")
            self.assertTrue(
                any(differing[name] for name in cases),
                f"{op} {dtype} now gives the same bits for every thread count: "
                f"remove it from the thread_count_dependent of its registry entry "
                f"({reason})",
            )
            exempt.update(cases)
        for name, ops in self.ops_by_case.items():
            if name in exempt:
                continue
            self.assertEqual(
                differing[name],
                [],
                f"{name} (runs {sorted(ops)}): bits differ from 1 thread's",
            )


if __name__ == "__main__":
    tf.test.main()
