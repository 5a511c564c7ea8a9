"""dtn_migrate.client.polling.poll, on a clock of its own."""


from dtn_migrate.client import exceptions
from dtn_migrate.client import polling
from tests.unit import utils as test_utils
from tests.unit import testcase


def away():
    return exceptions.HttpServiceUnavailable("restarting", http_status=503)


class TestPoll(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = test_utils.FakeTime()

    def poll(self, answers, **kwargs):
        """poll() of a fetch that gives ANSWERS in turn (an exception
        is raised); the calls' times.
        """
        answers, calls = iter(answers), []

        def fetch():
            calls.append(self.clock.now)
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer
        kwargs.setdefault("interval", 1.0)
        return polling.poll(fetch, sleep=self.clock.sleep,
                            clock=self.clock.monotonic, **kwargs), calls

    def test_until_a_true_value(self):
        value, calls = self.poll([None, {}, {"state": "passed"}])
        self.assertEqual({"state": "passed"}, value)
        self.assertEqual([0.0, 1.0, 2.0], calls)

    def test_rides_out_an_outage(self):
        value, calls = self.poll([away(), exceptions.CommunicationError(
            "refused"), "done"], outage=5)
        self.assertEqual("done", value)
        self.assertEqual(3, len(calls))

    def test_an_outage_longer_than_allowed_is_raised(self):
        self.assertRaises(exceptions.HttpServiceUnavailable, self.poll,
                          [away()] * 10, outage=2.5)
        # Away at 0, 1, 2 (within 2.5 s), raised at 3.
        self.assertEqual([1.0] * 3, self.clock.sleeps)

    def test_an_answer_starts_the_outage_over(self):
        # Two outages of 2 s each, with one answer between them: neither
        # is longer than 2.5 s, although 5 s pass from first to last.
        value, calls = self.poll(
            [away(), away(), away(), None, away(), away(), away(), "done"],
            outage=2.5)
        self.assertEqual("done", value)
        self.assertEqual(8, len(calls))

    def test_other_errors_at_once(self):
        self.assertRaises(exceptions.HttpNotFound, self.poll,
                          [None, exceptions.HttpNotFound("gone",
                                                         http_status=404)])
        self.assertEqual([1.0], self.clock.sleeps)

    def test_timeout_returns_none(self):
        value, calls = self.poll([None, False, [], {}], timeout=2.5)
        self.assertIsNone(value)
        self.assertEqual([0.0, 1.0, 2.0, 2.5], calls)

    def test_timeout_during_an_outage_returns_none(self):
        value, calls = self.poll([away()] * 4, timeout=2.5, outage=60)
        self.assertIsNone(value)
        self.assertEqual(4, len(calls))
