"""The source's window accounting on every path that re-queues an object.

The attempt's handlers are driven directly (no sockets): after each
step the window must hold exactly the bytes of the outstanding objects,
so a full window always has something in flight whose BLOCK_SYNC, NACK
or loss will free it.
"""

import os
import shutil
import tempfile


from dtn_migrate.transfer import config
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P

from tests.unit import testcase

KiB = 1 << 10
MiB = 1 << 20
OBJ = 256 * KiB


class _Outbox:
    def __init__(self):
        self.sent = []

    def post(self, msg):
        self.sent.append(msg)

    def close(self, timeout):
        pass


class WindowTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-window-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        path = os.path.join(self.tmp, "a")
        with open(path, "wb") as f:
            f.write(os.urandom(4 * MiB))
        cfg = config.TransferConfig(object_size=OBJ, window_bytes=1 * MiB,
                                    max_object_retries=5, max_file_retries=3)
        manifest = dataset.Manifest.new(
            "sink", [dataset.spec_for_path(path, "a", "00" * 64)])
        self.t = source.SourceTransfer(
            manifest, source.Peer("sink", "127.0.0.1", 1, b"k" * 32), cfg,
            os.path.join(self.tmp, "state"), "source")
        self.addCleanup(self.t.close)
        self.f = self.t.files[0]
        self.a = self.attempt()

    def attempt(self):
        a = source._Attempt(self.t)
        a.window = source._Window(self.t.cfg.window_bytes)
        a.outbox = _Outbox()
        return a

    def open_file(self, a=None):
        a = a or self.a
        with a.cond:
            self.assertIsNotNone(a._announce(self.f))
        a._on_file_id(P.FileId(0, P.FileStatus.OPEN))
        self.assertEqual(source.FileState.OPEN, self.f.state)

    def take(self, n, a=None):
        """Schedule ``n`` objects as the scheduler does; return them."""
        a = a or self.a
        taken = []
        for _ in range(n):
            with a.cond:
                pick, _ = a._pick()
            self.assertIsNotNone(pick)
            # _take would wait for a slot for ever: fail instead.
            w = a.window
            self.assertTrue(not w.used or w.used + OBJ <= w.capacity,
                            "window full: %d bytes held, %d outstanding"
                            % (w.used, len(self.f.outstanding)))
            self.assertEqual([pick], a._take(*pick))
            taken.append(pick[2])
        return taken

    def assertBalanced(self, a=None):
        a = a or self.a
        held = sum(source.ZERO_COST if i in self.f.light
                   else self.f.span(i)[1] for i in self.f.outstanding)
        self.assertEqual(held, a.window.used)
        self.assertGreaterEqual(a.window.used, 0)

    def assertWindowFree(self, a=None):
        a = a or self.a
        self.assertBalanced(a)
        self.assertTrue(a.window.acquire(OBJ, timeout=0))
        a.window.release(OBJ)

    def nack(self, index, a=None):
        (a or self.a)._on_nack(P.BlockNack(0, index, errors.Code.CHECKSUM))

    def sync(self, *indices):
        self.a._on_block_sync(P.BlockSync.from_ranges(
            [(0, i, 1) for i in indices]))


class TestNack(WindowTestCase):
    def test_nack_gives_back_its_slot(self):
        self.open_file()
        # Many rounds of a full window whose every object is damaged:
        # the window is never left full with nothing outstanding.
        for _ in range(self.t.cfg.max_object_retries):
            taken = self.take(4)
            self.assertEqual(1 * MiB, self.a.window.used)
            for i in taken:
                self.nack(i)
                self.assertBalanced()
            self.assertEqual(0, self.a.window.used)
            self.assertEqual(sorted(taken), sorted(list(self.f.pending)[:4]))
        self.assertEqual(source.FileState.OPEN, self.f.state)

    def test_repeated_and_stale_nacks_release_nothing_twice(self):
        self.open_file()
        taken = self.take(3)
        self.nack(taken[0])
        self.nack(taken[0])          # the same damaged copy, reported twice
        self.nack(15)                # never sent in this announcement
        self.assertBalanced()
        self.assertEqual(2 * OBJ, self.a.window.used)
        self.assertEqual(1, list(self.f.pending).count(taken[0]))
        self.assertEqual(1, list(self.f.pending).count(15))

    def test_too_many_nacks_fail_the_file_and_free_the_window(self):
        self.open_file()
        taken = self.take(4)
        for _ in range(self.t.cfg.max_object_retries):
            self.nack(taken[0])
            self.assertEqual(source.FileState.OPEN, self.f.state)
            self.assertEqual(taken[:1], self.take(1))
        self.nack(taken[0])
        self.assertEqual(source.FileState.FAILED, self.f.state)
        self.assertIn("failed its checksum 6 times", self.f.error)
        self.assertEqual(0, self.a.window.used)
        self.assertEqual(set(), self.f.outstanding)

    def test_block_sync_releases_only_what_it_logs(self):
        self.open_file()
        taken = self.take(4)
        self.sync(taken[0], taken[1], 15)
        self.assertBalanced()
        self.assertEqual(2 * OBJ, self.a.window.used)
        self.sync(taken[0])          # again: nothing more
        self.assertEqual(2 * OBJ, self.a.window.used)


class TestRestart(WindowTestCase):
    def mismatch(self):
        self.a._on_file_close(P.FileClose(
            0, P.CloseStatus.MISMATCH, errors.Code.HASH_MISMATCH, 4 * MiB,
            bytes(64), "sha512 mismatch"))

    def test_file_retry_gives_back_every_slot(self):
        self.open_file()
        for retry in range(self.t.cfg.max_file_retries):
            taken = self.take(4)
            self.sync(taken[0])
            stale = (self.f, self.f.generation, taken[1])
            self.mismatch()
            self.assertEqual(source.FileState.ANNOUNCED, self.f.state)
            self.assertEqual(0, self.a.window.used)
            self.assertEqual(set(), self.f.outstanding)
            self.assertTrue(self.a.outbox.sent[-1].flags &
                            P.FileFlags.RESTART)
            self.a._on_file_id(P.FileId(0, P.FileStatus.OPEN))
            # An object picked for the previous announcement is dropped,
            # and holds nothing.
            self.assertFalse(self.a._take(*stale))
            self.assertWindowFree()
            self.assertEqual(16, len(self.f.pending))
        self.mismatch()
        self.assertEqual(source.FileState.FAILED, self.f.state)
        self.assertEqual(0, self.a.window.used)

    def test_a_file_failed_by_mismatch_forgets_what_was_sent(self):
        # The sink's copy is wrong: a later run (a retry with a staged
        # file exported again) sends it from its start, claiming nothing.
        self.open_file()
        for _retry in range(self.t.cfg.max_file_retries):
            self.sync(*self.take(4))
            self.mismatch()
            self.a._on_file_id(P.FileId(0, P.FileStatus.OPEN))
        self.sync(*self.take(4))
        self.assertEqual(4, len(self.f.done))
        self.mismatch()
        self.assertEqual(source.FileState.FAILED, self.f.state)
        self.assertEqual(("hash_mismatch", 0),
                         (self.f.status()["code"], self.f.status()
                          ["bytes_done"]))
        self.assertEqual(0, len(self.t.log.done(0)))

    def test_reader_drops_objects_of_an_older_announcement(self):
        self.open_file()
        self.a.zero_copy = True
        taken = self.take(2)
        self.a.read_q.put((self.f, self.f.generation, taken[0]))
        self.mismatch()
        self.a._on_file_id(P.FileId(0, P.FileStatus.OPEN))
        self.a.read_q.put(None)
        self.a._reader()
        self.assertTrue(self.a.send_q.empty())

    def test_picked_before_a_restart_is_not_taken_twice(self):
        self.open_file()
        with self.a.cond:
            pick, _ = self.a._pick()
        self.mismatch()
        self.a._on_file_id(P.FileId(0, P.FileStatus.OPEN))
        again = self.take(3)
        self.assertIn(pick[2], again)
        self.assertFalse(self.a._take(*pick))
        self.assertBalanced()
        self.assertEqual(3 * OBJ, self.a.window.used)

    def test_file_done_or_failed_frees_its_slots(self):
        self.open_file()
        self.take(4)
        with self.a.cond:
            self.a._drop(self.f, "gone", errors.Code.IO)
        self.assertEqual(0, self.a.window.used)


class TestReconnect(WindowTestCase):
    def test_new_attempt_starts_with_nothing_outstanding(self):
        for _ in range(3):
            self.open_file()
            taken = self.take(4)
            self.nack(taken[0])
            self.a._teardown()
            self.assertEqual(source.FileState.PENDING, self.f.state)
            self.assertEqual(set(), self.f.outstanding)
            self.assertEqual(0, len(self.f.pending))
            self.a = self.attempt()
            self.assertWindowFree()
        self.open_file()
        self.assertEqual(16, len(self.f.pending))
        self.assertEqual(4, len(self.take(4)))
        self.assertBalanced()
