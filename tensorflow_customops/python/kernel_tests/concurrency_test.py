"""Every op gives the single-threaded result, bit for bit, when many Python
threads run it at once in eager mode, and when one graph runs many
independent copies of it on several inter-op threads. Kernels must keep no
state across calls and share nothing between concurrent calls."""

import concurrent.futures

import numpy as np
import tensorflow as tf

from tensorflow_customops.python.kernel_tests import op_cases

PYTHON_THREADS = 8
ITERATIONS = 2
COPIES_PER_GRAPH = 6
INTER_OP_THREADS = 4


def _numpy(tensors):
    return [t.numpy() for t in tensors]


def _run_in_threads(fn, args_per_thread):
    """fn(*args) for every args in args_per_thread, each in its own thread,
    all started together; returns the results in order."""
    with concurrent.futures.ThreadPoolExecutor(len(args_per_thread)) as pool:
        futures = [pool.submit(fn, *args) for args in args_per_thread]
        return [f.result() for f in futures]


class ConcurrencyTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cases = op_cases.all_cases()

    def _check_bits(self, case, expected, actual, where):
        self.assertEqual(len(actual), len(expected), where)
        for i, (want, got) in enumerate(zip(expected, actual)):
            self.assertEqual(got.dtype, want.dtype, f"{case.name} {where}[{i}]")
            self.assertTrue(
                np.array_equal(got.view(np.uint8), want.view(np.uint8)),
                f"{case.name} {where}: output {i} differs from the "
                f"single-threaded result",
            )

    def _inputs_and_references(self, case):
        """Seed 0 for 'same inputs', then one seed per thread; the reference
        of each computed alone."""
        inputs = [case.make_inputs(seed) for seed in range(PYTHON_THREADS + 1)]
        references = [_numpy(op_cases.evaluate(case, x)) for x in inputs]
        return inputs, references

    def test_every_registered_op_has_a_case(self):
        self.assertEqual(
            op_cases.uncovered_ops(self.cases),
            [],
            "registered ops without a case in op_cases.all_cases()",
        )

    def test_eager_from_many_threads(self):
        def run(case, inputs):
            return [_numpy(op_cases.evaluate(case, inputs)) for _ in range(ITERATIONS)]

        for case in self.cases:
            inputs, references = self._inputs_and_references(case)
            same = _run_in_threads(run, [(case, inputs[0])] * PYTHON_THREADS)
            different = _run_in_threads(
                run, [(case, inputs[i + 1]) for i in range(PYTHON_THREADS)]
            )
            for thread in range(PYTHON_THREADS):
                for iteration in range(ITERATIONS):
                    self._check_bits(
                        case,
                        references[0],
                        same[thread][iteration],
                        f"eager, same inputs, thread {thread}",
                    )
                    self._check_bits(
                        case,
                        references[thread + 1],
                        different[thread][iteration],
                        f"eager, thread {thread}'s inputs",
                    )

    def test_graph_with_parallel_copies(self):
        # Copies 0..COPIES-1 get seeds 0, 0, 1, 2, ...: two share inputs, the
        # rest differ; independent, so the inter-op pool runs them together.
        seeds = [0] + list(range(COPIES_PER_GRAPH - 1))
        for case in self.cases:
            inputs, references = self._inputs_and_references(case)

            @tf.function
            def copies(*flat_inputs, case=case):
                size = len(flat_inputs) // COPIES_PER_GRAPH
                return [
                    op_cases.evaluate(case, flat_inputs[i * size : (i + 1) * size])
                    for i in range(COPIES_PER_GRAPH)
                ]

            flat = [x for seed in seeds for x in inputs[seed]]
            # The function itself also runs from several Python threads.
            results = _run_in_threads(
                lambda fn, args: [_numpy(outs) for outs in fn(*args)],
                [(copies, flat)] * INTER_OP_THREADS,
            )
            for thread, copies_out in enumerate(results):
                for copy, seed in enumerate(seeds):
                    self._check_bits(
                        case,
                        references[seed],
                        copies_out[copy],
                        f"tf.function copy {copy}, caller thread {thread}",
                    )


if __name__ == "__main__":
    # Set before TensorFlow creates its thread pools.
    tf.config.threading.set_inter_op_parallelism_threads(INTER_OP_THREADS)
    tf.config.threading.set_intra_op_parallelism_threads(4)
    tf.test.main()
