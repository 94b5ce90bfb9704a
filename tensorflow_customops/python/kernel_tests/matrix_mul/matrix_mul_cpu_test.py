"""CustomOps>MatrixMul's float32 CPU paths: the AVX-512 and AVX2 GEMMs and the
baseline Eigen fallback, on odd shapes and every transpose case.

Each path is checked against a float64 NumPy product with a rigorous error
bound. The path is chosen once per process, and the test-only environment
variable TFCO_MATMUL_ISA=avx2|baseline lowers the choice, so each runs in its
own process. The AVX paths must also give the same bits as each other and for
1, 2 and 4 intra-op threads."""

import json
import os
import subprocess
import sys

import tensorflow as tf

# Prints, per case, the largest error as a fraction of its bound and a digest
# of the product's bits.
_CHILD = """
import hashlib, itertools, json, sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
import tensorflow_customops as tfco

# (m, k, n): tiny, odd, non-square, k = 1, k spanning several blocks of the
# GEMM's inner dimension with a remainder, and thin products (at most 8 rows
# or 16 columns), which take the direct paths.
SIZES = [(1, 1, 1), (3, 3, 3), (17, 17, 17), (33, 33, 33), (65, 65, 65),
         (257, 257, 257), (1, 257, 65), (65, 1, 33), (257, 33, 1),
         (13, 300, 47), (100, 513, 70), (3, 4099, 5), (200, 1000, 190),
         (8, 513, 300), (37, 600, 9), (300, 257, 16)]
rng = np.random.default_rng(11)
out = {}
for (m, k, n), ta, tb in itertools.product(SIZES, [False, True], [False, True]):
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    c = tfco.matrix_mul(a, b, ta, tb).numpy()
    a64 = (a.T if ta else a).astype(np.float64)
    b64 = (b.T if tb else b).astype(np.float64)
    # |c - a b| <= gamma_k |a| |b|, gamma_k = k u / (1 - k u), for any
    # summation order, with or without fused multiply-adds.
    u = 2.0 ** -24
    bound = k * u / (1 - k * u) * (np.abs(a64) @ np.abs(b64)) + 1e-30
    err = float(np.max(np.abs(c - a64 @ b64) / bound))
    digest = hashlib.sha256(c.tobytes()).hexdigest()
    out[f"{m}x{k}x{n} ta={ta} tb={tb}"] = [err, digest]
print(json.dumps(out))
"""


def _run(threads, isa=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TFCO_MATMUL_ISA", None)
    if isa:
        env["TFCO_MATMUL_ISA"] = isa
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(threads)],
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        raise AssertionError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def _cpu_has_avx2_fma():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


class MatrixMulCpuTest(tf.test.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.runs = {
            "best, 1 thread": _run(1),
            "best, 2 threads": _run(2),
            "best, 4 threads": _run(4),
            "avx2, 2 threads": _run(2, "avx2"),
            "baseline, 2 threads": _run(2, "baseline"),
        }

    def test_within_error_bound(self):
        for run, cases in self.runs.items():
            self.assertLen(cases, 64)  # 16 sizes x 4 transpose cases
            for case, (err, _) in cases.items():
                self.assertLessEqual(err, 1.0, f"{run}, {case}")

    def test_same_bits_for_every_thread_count_and_avx_isa(self):
        first = self.runs["best, 1 thread"]
        for run in ("best, 2 threads", "best, 4 threads", "avx2, 2 threads"):
            for case, (_, digest) in self.runs[run].items():
                self.assertEqual(digest, first[case][1], f"{run}, {case}")

    def test_baseline_is_another_path(self):
        if not _cpu_has_avx2_fma():
            self.skipTest("no AVX2 and FMA: every run takes the baseline path")
        # Eigen's unfused, differently ordered sums differ somewhere.
        best = self.runs["best, 2 threads"]
        baseline = self.runs["baseline, 2 threads"]
        self.assertTrue(any(baseline[c][1] != best[c][1] for c in best))


if __name__ == "__main__":
    tf.test.main()
