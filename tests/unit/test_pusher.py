"""The latest-value pusher (dtn_migrate.pusher)."""


from dtn_migrate import pusher
from tests.unit import utils as test_utils
from tests.unit import testcase

wait = test_utils.wait_until


class TestEventPusher(testcase.TestCase):
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

    def test_a_receiver_away_for_many_sends_gets_the_next_one(self):
        calls = []

        def send(*args):
            calls.append(args)
            if len(calls) <= 20:
                raise RuntimeError("broker away")

        p = pusher.EventPusher(send, interval=0.001)
        self.addCleanup(p.close)
        # Every push fails while the receiver is away, and none stops
        # the pusher: a value pushed after it is back goes out.
        for i in range(20):
            p.push("report", "t", None, lambda i=i: {"state": "s%d" % i})
            self.assertTrue(wait(lambda i=i: len(calls) > i))
        p.push("report", "t", None, lambda: {"state": "back"})
        self.assertTrue(wait(lambda: len(calls) == 21))
        self.assertEqual({"state": "back"}, calls[-1][3])
        self.assertTrue(p.thread.is_alive())
