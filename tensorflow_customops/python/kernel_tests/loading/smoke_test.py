"""The package's smoke (python -m tensorflow_customops.smoke) passes here:
every family's checks (python/ops/<family>_smoke.py) run and none fails."""

import contextlib
import io

import tensorflow as tf

from tensorflow_customops import smoke


class SmokeTest(tf.test.TestCase):
    def test_every_family_check_passes(self):
        names = [fn.__name__ for fn in smoke.checks()]
        self.assertTrue(names)
        self.assertEqual(len(names), len(set(names)), names)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = smoke.main()
        self.assertEqual(code, 0, out.getvalue())
        for name in names:
            self.assertRegex(out.getvalue(), rf"(PASSED|SKIPPED) {name}\b")


if __name__ == "__main__":
    tf.test.main()
