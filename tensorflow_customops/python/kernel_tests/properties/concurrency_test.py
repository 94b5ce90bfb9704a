"""Every op gives the single-threaded result, bit for bit, when many Python
threads run it at once in eager mode, and when one graph runs many
independent copies of it on several inter-op threads. Kernels must keep no
state across calls and share nothing between concurrent calls."""

import concurrent.futures

import tensorflow as tf

from tensorflow_customops.python.kernel_tests.properties import property_cases

PYTHON_THREADS = 8
ITERATIONS = 2
# Threads 0..3 share seed 0's inputs; threads 4..7 each get their own seed.
SEEDS = [0, 0, 0, 0, 1, 2, 3, 4]
# One copy of the op per seed in one graph: two copies share inputs.
GRAPH_SEEDS = [0, 0, 1, 2, 3, 4]
INTER_OP_THREADS = 4
GRAPH_CALLERS = 2


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
        # One case per op (with its gradient): dtype variants run the same
        # code, and the determinism test covers them.
        cls.cases, cls.uncovered = property_cases.covering_cases(
            property_cases.all_cases()
        )

    def _check_bits(self, case, expected, actual, where):
        self.assertEqual(len(actual), len(expected), where)
        for i, (want, got) in enumerate(zip(expected, actual)):
            self.assertEqual(got.dtype, want.dtype, f"{case.name} {where}[{i}]")
            self.assertEqual(got.shape, want.shape, f"{case.name} {where}[{i}]")
            self.assertTrue(
                got.tobytes() == want.tobytes(),
                f"{case.name} {where}: output {i} differs from the "
                f"single-threaded result",
            )

    def _inputs_and_references(self, case):
        """Inputs for every seed, and each one's result computed alone."""
        inputs = [
            case.make_inputs(seed) for seed in range(max(SEEDS + GRAPH_SEEDS) + 1)
        ]
        references = [_numpy(property_cases.evaluate(case, x)) for x in inputs]
        return inputs, references

    def test_every_registered_op_has_a_case(self):
        self.assertEqual(
            self.uncovered,
            [],
            property_cases.UNCOVERED_MESSAGE,
        )

    def test_eager_from_many_threads(self):
        def run(case, inputs):
            return [
                _numpy(property_cases.evaluate(case, inputs)) for _ in range(ITERATIONS)
            ]

        for case in self.cases:
            inputs, references = self._inputs_and_references(case)
            results = _run_in_threads(run, [(case, inputs[seed]) for seed in SEEDS])
            for thread, seed in enumerate(SEEDS):
                for iteration in range(ITERATIONS):
                    self._check_bits(
                        case,
                        references[seed],
                        results[thread][iteration],
                        f"eager, thread {thread} (seed {seed}), run {iteration}",
                    )

    def test_graph_with_parallel_copies(self):
        # The copies are independent, so the inter-op pool runs them together.
        for case in self.cases:
            inputs, references = self._inputs_and_references(case)

            @tf.function
            def copies(*flat_inputs, case=case):
                size = len(flat_inputs) // len(GRAPH_SEEDS)
                return [
                    property_cases.evaluate(
                        case, flat_inputs[i * size : (i + 1) * size]
                    )
                    for i in range(len(GRAPH_SEEDS))
                ]

            flat = [tf.constant(x) for seed in GRAPH_SEEDS for x in inputs[seed]]
            copies(*flat)  # traced once, before the threads call it
            # The function itself also runs from several Python threads.
            results = _run_in_threads(
                lambda fn, args: [_numpy(outs) for outs in fn(*args)],
                [(copies, flat)] * GRAPH_CALLERS,
            )
            for thread, copies_out in enumerate(results):
                for copy, seed in enumerate(GRAPH_SEEDS):
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
