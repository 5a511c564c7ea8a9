"""The source's sha512 fed in file order by the readers (sourcehash),
and the window of zero extents; the attempt is driven directly.
"""

import hashlib
import os
import threading

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.transfer.source import test_window as tsw

OBJ = tsw.OBJ
MiB = tsw.MiB


class HashTestCase(tsw.WindowTestCase):
    def setUp(self):
        super().setUp()
        self.path = self.f.spec.path
        with open(self.path, "rb") as fh:
            self.content = fh.read()
        self.f.sha512 = None
        self.f.spec.sha512 = None

    def start(self, checkpoint=0, done=()):
        if checkpoint:
            h = checksum.ResumableSha512()
            h.update(bytearray(self.content[:checkpoint]))
            with open(self.t._hash_checkpoint(self.f), "wb") as fh:
                fh.write(h.save())
        self.t._start_hashers()
        self.t._attempt = self.a
        for i in done:
            self.f.done.add(i)
        self.open_file()

    def feed(self, index):
        offset, length = self.f.span(index)
        view = memoryview(bytearray(self.content[offset:offset + length]))
        return self.a._hash(self.f, self.f.generation, offset, view)

    def send(self, n):
        """Take, read (feed) and confirm ``n`` objects in order."""
        for _ in range(n):
            i = self.take(1)[0]
            self.assertTrue(self.feed(i))
            self.sync(i)

    def assertHashed(self):
        self.assertEqual(hashlib.sha512(self.content).digest(), self.f.sha512)
        self.assertIsNone(self.f.hasher)
        self.assertFalse(os.path.exists(self.t._hash_checkpoint(self.f)))
        # The sink is told at once.
        self.assertEqual(P.CloseStatus.DECLARE, self.a.outbox.sent[-1].status)


class TestOrder(HashTestCase):
    def test_in_order(self):
        self.start()
        self.send(16)
        self.assertHashed()
        self.assertEqual(0, self.t.wire.bytes_hashed_again)

    def test_out_of_order_waits_for_the_object_before(self):
        self.start()
        taken = self.take(4)
        results = {}
        late = threading.Thread(
            target=lambda: results.update(late=self.feed(taken[1])))
        late.start()
        late.join(0.2)
        self.assertTrue(late.is_alive())        # waits for object 0
        self.assertEqual(0, self.f.hasher.offset)
        self.assertTrue(self.feed(taken[0]))
        late.join(5)
        self.assertTrue(results["late"])
        self.assertEqual(2 * OBJ, self.f.hasher.offset)

    def test_wait_ends_when_the_attempt_stops(self):
        self.start()
        taken = self.take(2)
        th = threading.Thread(target=self.feed, args=(taken[1],))
        th.start()
        self.a.stopped.set()
        th.join(5)
        self.assertFalse(th.is_alive())
        self.assertEqual(0, self.f.hasher.offset)

    def test_resend_is_not_hashed_twice(self):
        self.start()
        taken = self.take(2)
        self.feed(taken[0])
        self.feed(taken[0])
        self.assertEqual(OBJ, self.f.hasher.offset)


class TestResume(HashTestCase):
    def test_gaps_the_sink_holds_are_read_once(self):
        # Objects 0-7 are at the sink from an earlier run whose hash
        # checkpoint covers objects 0-2: 3-7 are read for the hash only,
        # 8-15 come from the reads for sending.
        self.start(checkpoint=3 * OBJ, done=range(8))
        self.send(8)
        self.assertHashed()
        self.assertEqual(5 * OBJ, self.t.wire.bytes_hashed_again)

    def test_trailing_objects_the_sink_holds(self):
        self.start(done=range(8, 16))
        self.send(8)
        self.assertHashed()
        self.assertEqual(8 * OBJ, self.t.wire.bytes_hashed_again)

    def test_nothing_left_to_send(self):
        self.start(checkpoint=OBJ, done=range(16))
        for th in self.a.threads:
            th.join(10)
        self.assertHashed()
        self.assertEqual(15 * OBJ, self.t.wire.bytes_hashed_again)

    def test_stop_checkpoints(self):
        self.start()
        self.send(3)
        self.t._stop_hashers()
        with open(self.t._hash_checkpoint(self.f), "rb") as fh:
            h = checksum.ResumableSha512.restore(fh.read())
        self.assertEqual(3 * OBJ, h.offset)


class TestZeroRuns(tsw.WindowTestCase):
    def setUp(self):
        super().setUp()
        # 16 objects: data in objects 5 and 6, holes elsewhere.
        path = os.path.join(self.tmp, "sparse")
        with open(path, "wb") as fh:
            fh.truncate(16 * OBJ)
            fh.seek(5 * OBJ)
            fh.write(os.urandom(2 * OBJ))
        manifest = dataset.Manifest.new(
            "sink", [dataset.spec_for_path(path, "s", "00" * 64)])
        self.t = source.SourceTransfer(
            manifest, self.t.peer, self.t.cfg,
            os.path.join(self.tmp, "state2"), "source")
        self.addCleanup(self.t.close)
        self.f = self.t.files[0]
        self.a = self.attempt()
        self.a.zero_extents = True

    def pick_all(self):
        items = []
        while True:
            with self.a.cond:
                pick, _ = self.a._pick()
            if pick is None:
                return items
            items.extend(self.a._take(*pick))

    def test_holes_are_runs_that_hold_little_window(self):
        self.open_file()
        items = self.pick_all()
        self.assertEqual([(0, 5), (5, 0), (6, 0), (7, 9)],
                         [(i, run) for _, _, i, run in items])
        self.assertEqual(2 * OBJ + 14 * source.ZERO_COST,
                         self.a.window.used)
        self.assertBalanced()
        # BLOCK_SYNC of everything gives it all back.
        self.a._on_block_sync(P.BlockSync.from_ranges([(0, 0, 16)]))
        self.assertEqual(0, self.a.window.used)
        self.assertEqual(16, len(self.f.done))

    def test_off_sends_holes_as_objects(self):
        self.a.zero_extents = False
        self.open_file()
        taken = []
        for _ in range(16):
            taken += self.take(1)
            self.sync(taken[-1])
        self.assertEqual(list(range(16)), taken)
        self.assertEqual(0, self.a.window.used)

    def test_read_zeros_give_back_their_window(self):
        self.open_file()
        with self.a.cond:
            pick, _ = self.a._pick()
        self.a.zero_extents = False
        self.a._take(*pick[:3])
        self.assertEqual(OBJ, self.a.window.used)
        self.a._lighten(self.f, self.f.generation, pick[2])
        self.assertEqual(source.ZERO_COST, self.a.window.used)
        self.assertBalanced()
        self.nack(pick[2])
        self.assertEqual(0, self.a.window.used)


class TestBusySenders(tsw.WindowTestCase):
    def test_a_sender_waiting_for_work_is_not_busy(self):
        streams = self.t.cfg.streams
        self.assertEqual(streams, self.a.busy_senders())
        th = threading.Thread(target=self.a._sender, args=(0, None))
        th.start()
        for _ in range(100):
            if self.a.idle_senders:
                break
            th.join(0.01)
        self.assertEqual(streams - 1, self.a.busy_senders())
        self.a.send_q.put(None)
        th.join(5)
        self.assertEqual(streams, self.a.busy_senders())
