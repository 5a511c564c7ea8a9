"""Tests of dtn_migrate.transfer.progress.Progress."""

import random
import threading
from unittest import mock


from dtn_migrate.transfer import progress

from tests.unit import testcase


class FakeClock:
    def __init__(self, t=1000.0):
        self.t = t

    def monotonic(self):
        return self.t


class ProgressTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = FakeClock()
        patcher = mock.patch.object(progress, "time", self.clock)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_initial_snapshot(self):
        p = progress.Progress(1000, 10, 2)
        s = p.snapshot()
        self.assertEqual(1000, s["bytes_total"])
        self.assertEqual(10, s["objects_total"])
        self.assertEqual(2, s["files_total"])
        for key in ("bytes_done", "objects_done", "files_done",
                    "files_failed", "bytes_sent", "bytes_resent",
                    "objects_resent", "objects_corrupt", "attempts"):
            self.assertEqual(0, s[key], key)
        self.assertEqual(0.0, s["percent"])
        self.assertEqual(0, s["rate"])
        self.assertIsNone(s["eta"])
        self.assertEqual(0, s["elapsed"])

    def test_empty_transfer_is_complete(self):
        self.assertEqual(100.0, progress.Progress().snapshot()["percent"])

    def test_add(self):
        p = progress.Progress(1000)
        p.add(bytes_done=100, objects_done=1)
        p.add(bytes_done=150, bytes_sent=300, attempts=1)
        s = p.snapshot()
        self.assertEqual(250, s["bytes_done"])
        self.assertEqual(1, s["objects_done"])
        self.assertEqual(300, s["bytes_sent"])
        self.assertEqual(1, s["attempts"])
        self.assertEqual(25.0, s["percent"])

    def test_add_from_threads(self):
        p = progress.Progress(1 << 30)

        def work():
            for _ in range(2000):
                p.add(bytes_done=3, objects_done=1)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        s = p.snapshot()
        self.assertEqual(48000, s["bytes_done"])
        self.assertEqual(16000, s["objects_done"])

    def test_rate_and_eta(self):
        p = progress.Progress(10000)
        self.clock.t += 1.0
        p.add(bytes_done=1000)
        s = p.snapshot()
        self.assertEqual(1000.0, s["rate"])
        self.assertEqual(9.0, s["eta"])
        self.assertEqual(1.0, s["elapsed"])
        self.assertEqual(10.0, s["percent"])

    def test_rate_decays_when_stalled(self):
        p = progress.Progress(10000)
        self.clock.t += 1.0
        p.add(bytes_done=1000)
        p.snapshot()
        self.clock.t += 2.0
        s = p.snapshot()
        # One half-life without progress halves the rate.
        self.assertAlmostEqual(500.0, s["rate"], places=1)
        self.assertAlmostEqual(18.0, s["eta"], places=1)

    def test_rate_smoothing_between_samples(self):
        p = progress.Progress(10 ** 9)
        self.clock.t += 1.0
        p.add(bytes_done=1000)
        p.snapshot()
        self.clock.t += 1.0
        p.add(bytes_done=3000)
        rate = p.snapshot()["rate"]
        self.assertGreater(rate, 1000)
        self.assertLess(rate, 3000)

    def test_short_interval_keeps_rate(self):
        p = progress.Progress(10000)
        self.clock.t += 1.0
        p.add(bytes_done=1000)
        first = p.snapshot()["rate"]
        self.clock.t += 0.1
        p.add(bytes_done=5000)
        self.assertEqual(first, p.snapshot()["rate"])

    def test_average_rate_before_first_sample(self):
        p = progress.Progress(10000)
        self.clock.t += 0.1
        p.add(bytes_done=100)
        s = p.snapshot()
        self.assertEqual(1000.0, s["rate"])
        self.assertEqual(9.9, s["eta"])

    def test_done_past_total(self):
        p = progress.Progress(100)
        self.clock.t += 1.0
        p.add(bytes_done=150)
        s = p.snapshot()
        self.assertEqual(0.0, s["eta"])
        self.assertEqual(150.0, s["percent"])

    def test_never_negative(self):
        rnd = random.Random(11)
        p = progress.Progress(10 ** 7, 100, 3)
        for _ in range(500):
            self.clock.t += rnd.choice((0.0, 0.05, 0.3, 1.0, 5.0))
            if rnd.random() < 0.7:
                p.add(bytes_done=rnd.randrange(0, 50000),
                      bytes_sent=rnd.randrange(0, 60000))
            if rnd.random() < 0.05:
                p.start()
            s = p.snapshot()
            self.assertGreaterEqual(s["rate"], 0)
            self.assertGreaterEqual(s["elapsed"], 0)
            self.assertGreaterEqual(s["percent"], 0)
            if s["eta"] is not None:
                self.assertGreaterEqual(s["eta"], 0)

    def test_start_resets_clock_and_rate_base(self):
        p = progress.Progress(100000)
        # Bytes the sink already held, counted long before the start.
        self.clock.t += 100.0
        p.add(bytes_done=50000)
        p.start()
        s = p.snapshot()
        self.assertEqual(0, s["elapsed"])
        self.assertEqual(0, s["rate"])
        self.assertIsNone(s["eta"])
        self.assertEqual(50.0, s["percent"])
        self.clock.t += 0.1
        s = p.snapshot()
        self.assertEqual(0.1, s["elapsed"])
        self.assertEqual(0, s["rate"])
        self.clock.t += 0.9
        p.add(bytes_done=1000)
        s = p.snapshot()
        self.assertEqual(1000.0, s["rate"])
        self.assertEqual(49.0, s["eta"])

    def test_start_forgets_old_rate(self):
        p = progress.Progress(10 ** 6)
        self.clock.t += 1.0
        p.add(bytes_done=100000)
        self.assertEqual(100000.0, p.snapshot()["rate"])
        self.clock.t += 60.0
        p.start()
        self.clock.t += 0.1
        s = p.snapshot()
        self.assertEqual(0, s["rate"])
        self.assertIsNone(s["eta"])
