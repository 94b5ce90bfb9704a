"""The CPU emulation of CUDA (--config=cuda_emulation): barriers, shuffles,
atomics and stream callbacks behave as on a GPU, and the faults the GPU
check relies on it to find are reported: bad launches, traps, threads
waiting at different barriers, accesses past an allocation's end and host
reads of device memory; under --config=cuda_emulation_racecheck, accesses of
a block's threads that no barrier orders. Skipped in other CUDA builds,
whose device (if any) is a real one."""

import os
import subprocess
import unittest

_BINARY = os.path.join(os.path.dirname(__file__), "emulation_check")


def _run(check):
    return subprocess.run(
        [_BINARY, check], capture_output=True, text=True, check=False, timeout=60
    )


class EmulationTest(unittest.TestCase):
    def setUp(self):
        if _run("barriers").returncode == 3:
            self.skipTest("not built with --config=cuda_emulation")

    def test_block_barriers_and_warp_shuffles(self):
        # Three blocks each sum 0..999 through shared memory; each warp adds
        # its lane numbers by shuffles.
        result = _run("barriers")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["499500"] * 3 + ["496"] * 3)

    def test_barriers_order_a_blocks_threads_and_atomics_do_not_race(self):
        # Under the race check too: no report.
        result = _run("neighbours")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(
            result.stdout.split(), [str(i) for i in range(1, 64)] + ["0", "64"]
        )

    def test_threads_of_a_block_that_no_barrier_orders_are_a_race(self):
        if _run("racecheck").stdout != "yes\n":
            self.skipTest("not built with --config=cuda_emulation_racecheck")
        result = _run("race")
        # ThreadSanitizer's status with halt_on_error (.bazelrc).
        self.assertEqual(result.returncode, 66, result.stdout)
        self.assertIn("WARNING: ThreadSanitizer: data race", result.stderr)
        self.assertIn("Neighbours(int*, bool)::slot'", result.stderr)

    def test_callbacks_run_on_another_thread_before_synchronize_returns(self):
        result = _run("callbacks")
        self.assertEqual(result.stdout, "calls after synchronize: 2\n")

    def test_a_bad_launch_is_the_last_error_once(self):
        result = _run("config")
        self.assertEqual(
            result.stdout.splitlines(),
            [
                "invalid configuration argument",
                "invalid configuration argument",
                "no error",
            ],
        )

    def test_a_trap_is_sticky(self):
        result = _run("trap")
        self.assertEqual(
            result.stdout.splitlines(),
            [
                "synchronize: unspecified launch failure",
                "malloc: unspecified launch failure",
            ],
        )

    def test_threads_at_different_barriers_fail_the_kernel(self):
        result = _run("divergent")
        self.assertIn(
            "threads wait at different barriers in block (0, 0, 0)", result.stderr
        )
        self.assertEqual(result.stdout, "synchronize: unspecified launch failure\n")

    def test_a_write_past_an_allocation_stops_the_process(self):
        result = _run("overrun")
        self.assertLess(result.returncode, 0)
        self.assertRegex(
            result.stderr,
            r"past the end of a device allocation\) by thread \(0, 0, 0\) of "
            r"block \(0, 0, 0\): .*Params = \{float\*, int\}",
        )
        self.assertNotIn("not stopped", result.stdout)

    def test_host_code_reading_device_memory_stops_the_process(self):
        result = _run("host_read")
        self.assertLess(result.returncode, 0)
        self.assertIn(
            "(device memory, outside a kernel, copy or fill) by host code",
            result.stderr,
        )
        self.assertNotIn("read", result.stdout)


if __name__ == "__main__":
    unittest.main()
