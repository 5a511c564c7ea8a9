"""The latest-value pusher (dtn_migrate.pusher)."""

import testtools

from dtn_migrate import pusher
from dtn_migrate import utils
from tests.unit import utils as test_utils


def wait(predicate, timeout=10):
    return utils.wait_for(predicate, timeout, interval=0.02)


class TestEventPusher(testtools.TestCase):
    def test_coalesces_and_sends_state_changes_at_once(self):
        sent = test_utils.Recorder()
        # The interval is long next to the waits for what must not wait
        # for it (a busy CI host took more than 0.4 s against 0.5).
        p = pusher.EventPusher(sent, interval=3.0)
        self.addCleanup(p.close)
        value = {"state": "open", "durable": 0}
        for i in range(50):
            value = {"state": "open", "durable": i}
            p.push("watermark", "t", "f", lambda v=value: v)
        self.assertTrue(wait(lambda: sent.calls))
        value = {"state": "done", "durable": 50}
        p.push("watermark", "t", "f", lambda: value)
        # A state change is not held back by the interval.
        self.assertTrue(wait(
            lambda: sent.calls[-1][3]["state"] == "done", 2.0))
        self.assertLessEqual(len(sent.calls), 3)
        # Numbered, so that the engine drops one handled late.
        numbers = [c[4][1] for c in sent.calls]
        self.assertEqual(sorted(set(numbers)), numbers)
        self.assertEqual({p.run}, {c[4][0] for c in sent.calls})
        # The latest value of a held key goes out after the interval.
        p.push("watermark", "t", "f", lambda: {"state": "done",
                                               "durable": 51})
        self.assertTrue(wait(
            lambda: sent.calls[-1][3]["durable"] == 51, 8))

    def test_a_failing_send_or_getter_does_not_stop_it(self):
        calls = []

        def send(*args):
            calls.append(args)
            if len(calls) == 1:
                raise RuntimeError("broker away")

        p = pusher.EventPusher(send, interval=0.01)
        self.addCleanup(p.close)
        p.push("report", "t", None, lambda: 1 / 0)
        p.push("report", "u", None, lambda: {"state": "a"})
        p.push("report", "v", None, lambda: {"state": "b"})
        self.assertTrue(wait(lambda: len(calls) == 2))

    def test_thread_is_named_and_nothing_is_sent_after_close(self):
        sent = test_utils.Recorder()
        p = pusher.EventPusher(sent, interval=0.01, name="import-report-x")
        p.push("report", "t", None, lambda: {"state": "a"})
        self.assertTrue(wait(lambda: sent.calls))
        self.assertEqual("import-report-x", p.thread.name)
        p.close()
        p.push("report", "t", None, lambda: {"state": "b"})
        p.thread.join(5)
        self.assertFalse(p.thread.is_alive())
        self.assertEqual(1, len(sent.calls))
