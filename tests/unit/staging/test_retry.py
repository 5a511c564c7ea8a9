"""The staging package's retry helpers (tenacity); its polls:
``tests/unit/common/test_polling.py``.
"""

import time


from dtn_migrate.staging import backend
from dtn_migrate.staging import retry

from tests.unit import testcase


class Boom(Exception):
    pass


class TestCall(testcase.TestCase):

    def test_retries_until_success_with_doubling_waits(self):
        calls, waits, seen = [], [], []

        def op(attempt):
            calls.append(attempt)
            if attempt < 5:
                raise backend.Unavailable("down %d" % attempt)
            return "ok"

        got = retry.call(op, lambda e: e.retryable, retry.tries(6),
                         retry.doubling(0.1, 0.5), sleep=waits.append,
                         before_retry=lambda e, n: seen.append((str(e), n)))
        self.assertEqual("ok", got)
        self.assertEqual([1, 2, 3, 4, 5], calls)
        self.assertEqual([0.1, 0.2, 0.4, 0.5], waits)
        self.assertEqual([("down %d" % n, n) for n in range(1, 5)], seen)

    def test_gives_up_after_the_last_try_and_counts(self):
        waits = []

        def op(attempt):
            raise backend.Unavailable("down %d" % attempt)

        err = self.assertRaises(backend.Unavailable, retry.call, op,
                                lambda e: True, retry.tries(4),
                                retry.NO_WAIT, sleep=waits.append)
        self.assertEqual("down 4", str(err))
        self.assertEqual(4, retry.attempts_made(err))
        self.assertEqual([0, 0, 0], waits)

    def test_other_errors_are_raised_at_once(self):
        calls = []

        def op(attempt):
            calls.append(attempt)
            raise Boom()

        err = self.assertRaises(Boom, retry.call, op,
                                lambda e: isinstance(e, backend.Unavailable),
                                retry.tries(10), retry.NO_WAIT)
        self.assertEqual([1], calls)
        self.assertEqual(1, retry.attempts_made(err))

    def test_sleep_can_abandon(self):
        def sleep(seconds):
            raise Boom("stopping")

        def op(attempt):
            raise backend.Unavailable("down")

        self.assertRaises(Boom, retry.call, op, lambda e: True,
                          retry.tries(10), retry.NO_WAIT, sleep=sleep)

    def test_within_stops_before_a_wait_overshoots(self):
        def op(attempt):
            raise backend.Unavailable("down")

        began = time.monotonic()
        err = self.assertRaises(backend.Unavailable, retry.call, op,
                                lambda e: True, retry.within(0.3),
                                retry.doubling(0.05, 0.1))
        elapsed = time.monotonic() - began
        self.assertLess(elapsed, 0.3 + 2)
        self.assertGreater(retry.attempts_made(err), 2)

    def test_deadline_makes_the_last_call_at_the_deadline(self):
        stop, wait = retry.deadline(0.3, retry.doubling(0.2, 5))
        stamps = []
        began = time.monotonic()

        def op(attempt):
            stamps.append(time.monotonic() - began)
            raise backend.StagingNotFound("gone")

        self.assertRaises(backend.StagingNotFound, retry.call, op,
                          lambda e: True, stop, wait)
        self.assertGreaterEqual(stamps[-1], 0.3)
        self.assertLess(stamps[-1], 0.3 + 2)
        self.assertGreaterEqual(len(stamps), 2)
