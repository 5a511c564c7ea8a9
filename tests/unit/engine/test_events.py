"""The engine's event board: latest value per key, waits, fallback."""

import threading
import time


from dtn_migrate.engine import events

from tests.unit import testcase

TID = "a" * 32


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class TestEventBoard(testcase.TestCase):
    def test_latest_value_wins(self):
        board = events.EventBoard()
        k = events.key(events.WATERMARK, TID, "f")
        self.assertIsNone(board.get(k))
        self.assertEqual(0, board.seq_of(k))
        board.post(k, {"durable": 1})
        seq = board.post(k, {"durable": 2})
        self.assertEqual(seq, board.seq_of(k))
        self.assertEqual({"durable": 2}, board.get(k)[2])

    def test_wait_wakes_on_a_newer_value(self):
        board = events.EventBoard()
        k = events.key(events.REPORT, TID)
        seen = board.seq_of(k)
        threading.Timer(0.1, board.post, (k, {"state": "active"})).start()
        start = time.monotonic()
        self.assertTrue(board.wait(k, seen, 10))
        self.assertLess(time.monotonic() - start, 5)
        # Nothing newer: times out.
        self.assertFalse(board.wait(k, board.seq_of(k), 0.05))

    def test_wait_stops_with_the_migration(self):
        board = events.EventBoard()
        stop = threading.Event()
        k = events.key(events.TRANSFER, TID)

        def stopping():
            stop.set()
            board.wake()

        threading.Timer(0.1, stopping).start()
        start = time.monotonic()
        self.assertFalse(board.wait(k, 0, 10, stop=stop))
        self.assertLess(time.monotonic() - start, 5)

    def test_fetch_uses_fresh_values_and_calls_for_stale_ones(self):
        clock = FakeClock()
        board = events.EventBoard(clock=clock)
        k = events.key(events.TRANSFER, TID)
        calls = []

        def call():
            calls.append(1)
            return {"state": "running", "n": len(calls)}

        self.assertEqual(1, board.fetch(k, call, 10)["n"])  # nothing yet
        clock.now += 5
        self.assertEqual(1, board.fetch(k, call, 10)["n"])  # fresh
        board.post(k, {"state": "complete"})                # pushed
        clock.now += 9
        self.assertEqual("complete", board.fetch(k, call, 10)["state"])
        clock.now += 2
        self.assertEqual(2, board.fetch(k, call, 10)["n"])  # stale: asked
        self.assertEqual(2, len(calls))

    def test_a_failed_call_leaves_the_board(self):
        board = events.EventBoard()
        k = events.key(events.TRANSFER, TID)

        def call():
            raise RuntimeError("agent away")

        self.assertRaises(RuntimeError, board.fetch, k, call, 0)
        self.assertIsNone(board.get(k))

    def test_value_pushed_during_a_call_is_kept(self):
        board = events.EventBoard()
        k = events.key(events.WATERMARK, TID, "f")

        def call():
            board.post(k, {"durable": 9})       # pushed meanwhile
            return {"durable": 1}

        self.assertEqual({"durable": 1}, board.fetch(k, call, 0))
        self.assertEqual({"durable": 9}, board.get(k)[2])

    def test_pushing_is_per_kind_and_ages(self):
        clock = FakeClock()
        board = events.EventBoard(clock=clock)
        board.post(events.key(events.WATERMARK, TID, "f"), {}, pushed=False)
        self.assertFalse(board.pushing(events.WATERMARK, 10))
        board.post(events.key(events.WATERMARK, TID, "f"), {})
        self.assertTrue(board.pushing(events.WATERMARK, 10))
        self.assertFalse(board.pushing(events.TRANSFER, 10))
        clock.now += 11
        self.assertFalse(board.pushing(events.WATERMARK, 10))

    def test_bounded_and_forget(self):
        board = events.EventBoard(max_keys=3)
        for i in range(5):
            board.post(events.key(events.TRANSFER, "%032x" % i), i)
        self.assertEqual(3, len(board.items))
        self.assertIsNone(board.get(events.key(events.TRANSFER, "%032x" % 0)))
        board.post(events.key(events.WATERMARK, TID, "x"), 1)
        board.post(events.key(events.REPORT, TID), 1)
        board.forget(TID)
        self.assertEqual([events.key(events.TRANSFER, "%032x" % 4)],
                         list(board.items))

    def test_check_event(self):
        events.check_event(events.REPORT, TID, None, None)
        events.check_event(events.WATERMARK, TID, "a/b", {"durable": 0})
        for bad in (("x", TID, None, None),
                    (events.REPORT, "abc", None, None),
                    (events.WATERMARK, TID, 3, None),
                    (events.REPORT, TID, None, [1])):
            self.assertRaises(ValueError, events.check_event, *bad)


class TestWaiter(testcase.TestCase):
    def test_wakes_on_a_value_newer_than_this_threads_last_read(self):
        board = events.EventBoard()
        k = events.key(events.WATERMARK, TID, "f")
        board.post(k, {"durable": 1})
        waiter = events.Waiter(board, k)
        self.assertTrue(waiter.wait(0))         # never read: one is there
        waiter.mark()
        self.assertFalse(waiter.wait(0.01))
        board.post(events.key(events.WATERMARK, TID, "other"), {})
        self.assertFalse(waiter.wait(0.01))     # another key
        threading.Timer(0.05, board.post, (k, {"durable": 2})).start()
        self.assertTrue(waiter.wait(10))
        waiter.mark()
        self.assertFalse(waiter.wait(0.01))

    def test_each_thread_waits_against_its_own_read(self):
        board = events.EventBoard()
        k = events.key(events.WATERMARK, TID, "f")
        waiter = events.Waiter(board, k)
        waiter.mark()
        board.post(k, {"durable": 1})
        # Another thread reads the new value: this one has not.
        other = threading.Thread(target=waiter.mark)
        other.start()
        other.join()
        self.assertTrue(waiter.wait(0))
