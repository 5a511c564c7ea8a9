"""dtn_migrate.common.polling.poll, on a clock of its own."""


from dtn_migrate.common import polling
from dtn_migrate.staging import retry
from tests.unit import utils as test_utils
from tests.unit import testcase


class Boom(Exception):
    pass


class TestPoll(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = test_utils.FakeTime()

    def wait(self, check, *args, **kwargs):
        return polling.poll(check, *args, clock=self.clock.monotonic,
                            sleep=self.clock.sleep, **kwargs)

    def test_returns_the_first_true_value(self):
        answers = iter([None, 0, "", {"state": "active"}, "never asked"])
        self.assertEqual({"state": "active"},
                         self.wait(lambda: next(answers), 10, 0.5))
        self.assertEqual([0.5] * 3, self.clock.sleeps)
        self.assertEqual("never asked", next(answers))

    def test_true_at_once_sleeps_never(self):
        self.assertIs(True, self.wait(lambda: True, 10))
        self.assertEqual([], self.clock.sleeps)

    def test_timeout_returns_the_last_false_value(self):
        calls = []

        def check():
            calls.append(self.clock.now)
            return ""

        self.assertEqual("", self.wait(check, 1.0, 0.4))
        # The pause before the deadline is cut short: the last call is
        # at the deadline, not after it.
        self.assertEqual([0.4, 0.4, 0.2],
                         [round(s, 6) for s in self.clock.sleeps])
        self.assertEqual([0.0, 0.4, 0.8, 1.0],
                         [round(t, 6) for t in calls])

    def test_no_timeout_waits_as_long_as_it_takes(self):
        answers = iter([False] * 500 + [7])
        self.assertEqual(7, self.wait(lambda: next(answers), None, 60))
        self.assertEqual(500, len(self.clock.sleeps))
        self.assertEqual({60}, set(self.clock.sleeps))

    def test_an_error_propagates_at_once(self):
        calls = []

        def check():
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("server exited")
            return False

        exc = self.assertRaises(RuntimeError, self.wait, check, 10, 1)
        self.assertEqual("server exited", str(exc))
        self.assertEqual(2, len(calls))
        self.assertEqual([1], self.clock.sleeps)

    def test_zero_timeout_checks_once(self):
        calls = []
        self.assertIs(False, self.wait(lambda: calls.append(1) or False,
                                       0, 1))
        self.assertEqual(([1], []), (calls, self.clock.sleeps))

    def test_real_clock_by_default(self):
        answers = iter([False, False, True])
        self.assertIs(True, polling.poll(lambda: next(answers), 5, 0.01))

    def test_done_says_what_is_waited_for(self):
        # A false value may be the end (a result of 0, an empty list).
        answers = iter([None, None, 0, 5])
        self.assertEqual(0, self.wait(lambda: next(answers), 10, 1,
                                      done=lambda v: v is not None))
        self.assertEqual([1, 1], self.clock.sleeps)

    def test_done_at_the_timeout_returns_the_last_value(self):
        answers = iter(range(100))
        self.assertEqual(3, self.wait(lambda: next(answers), 3, 1,
                                      done=lambda v: v >= 50))

    def test_growing_waits(self):
        # The staging library's waits between the polls of a followed
        # file (a tenacity wait), without and with a deadline.
        values = iter(range(100))
        self.assertEqual(7, self.wait(lambda: next(values),
                                      interval=retry.doubling(0.01, 0.04),
                                      done=lambda v: v >= 7))
        self.assertEqual([0.01, 0.02, 0.04, 0.04, 0.04, 0.04, 0.04],
                         self.clock.sleeps)
        self.clock.sleeps.clear()
        self.assertEqual(0, self.wait(lambda: 0, 0.05,
                                      retry.doubling(0.01, 0.04)))
        self.assertEqual([0.01, 0.02, 0.02],
                         [round(s, 6) for s in self.clock.sleeps])

    def test_a_sleep_that_raises_ends_the_poll(self):
        # A pause that ends early on a cancel raises out of the poll.
        def sleep(seconds):
            raise Boom("cancelled")

        calls = []
        self.assertRaises(Boom, polling.poll,
                          lambda: calls.append(1), 10, 1, sleep=sleep)
        self.assertEqual([1], calls)
