"""The sink's data path for issue 13: capabilities it answers, zero
extents left as holes, bounded zstd objects, the prefix sha512 fed from
the received buffers (re-reading only gaps, resuming from its
checkpoint), fewer per-file costs, and the file events listener.
"""

import hashlib
import os
import threading

import fixtures
import zstandard

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import direct
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.sink import recv as sinkrecv
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.sink import session as sinksession
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.transport import tcp
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.transfer import test_direct
from tests.unit.transfer.sink import test_session as base
from tests.unit import testcase

OBJ = base.OBJ
KEY = base.KEY


class DataTestCase(base.SessionTestCase):

    caps = P.Caps.ZERO_EXTENTS | P.Caps.ZSTD

    def setUp(self):
        super().setUp()
        # The base session, again with this test's capabilities.
        self.session.close("replaced")
        tid = os.urandom(16)
        connect = P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0, tid,
                            0, OBJ, 1, os.urandom(32), "source")
        self.notified = []
        self.record = sink.TransferRecord(tid.hex(), "source", self.listen)
        self.session = sinksession.SinkSession(
            self.server, connect, self.control, 1, tcp.TcpSinkPlane(),
            self.record, self.caps)
        self.addCleanup(self.session.close, "test over")
        self.reads = []
        real_preadv = os.preadv

        def preadv(fd, bufs, offset):
            self.reads.append(offset)
            return real_preadv(fd, bufs, offset)
        self.useFixture(fixtures.MonkeyPatch("os.preadv", preadv))

    def listen(self, tid, name):
        self.notified.append((tid, name))

    def data(self, index):
        return bytes([index % 250 + 1]) * OBJ

    def announce(self, nobjects, name="h.img", flags=P.FileFlags.NONE,
                 done=None):
        msg = P.NewFile(0, flags, nobjects * OBJ, 0, 0o644, OBJ, bytes(64),
                        name, done.encode_runs() if done else b"")
        reply = self.session._open_file(msg)
        self.assertIn(reply.status, (P.FileStatus.OPEN, P.FileStatus.RESET),
                      reply)
        return self.session.files[0]

    def write_data(self, f, index):
        buf = self.session.pool.acquire(timeout=5)
        buf.view[:OBJ] = self.data(index)
        self.assertTrue(self.session._submit(
            f, self.session._write, f, index, index * OBJ, buf, OBJ))

    def zero(self, f, index, count):
        self.assertTrue(self.session._submit(
            f, self.session._zero, f, index, count))

    def drain(self):
        with self.session.cond:
            self.session.cond.wait_for(lambda: not self.session.tasks, 10)

    def expected(self, content):
        return hashlib.sha512(content).digest()

    def declare(self, f, digest):
        self.session._declare(P.FileClose(f.file_id, P.CloseStatus.OK, 0,
                                          f.size, digest))

    def finish(self, f):
        self.drain()
        self.session._sync_now()
        self.drain()
        self.session._sync_now()
        closes = self.control.wait_for(P.MsgType.FILE_CLOSE)
        self.assertTrue(closes, self.events)
        return closes[-1]


class TestCaps(testcase.TestCase):
    """CONNECT_ACK.caps: the subset of the asked optional capabilities
    the sink accepts, echoed on the data connections.
    """

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        from dtn_migrate.transfer import config
        self.cfg = config.TransferConfig(object_size=256 << 10,
                                         min_free_bytes=0)
        self.server = sink.SinkServer(self.root, self.cfg, "sink",
                                      lambda peer: KEY, host="127.0.0.1")
        self.server.start()
        self.addCleanup(self.server.stop)
        self.peer = source.Peer("sink", "127.0.0.1", self.server.port, KEY)
        self.tid = os.urandom(16)

    def connect(self, caps, role=P.Role.CONTROL, epoch=0):
        conn, ack = source.open_connection(self.peer, P.Connect(
            P.VERSION, P.VERSION, role, 0, caps, self.tid, epoch,
            self.cfg.object_size, 1, os.urandom(32), "source"), self.cfg)
        self.addCleanup(conn.close)
        return conn, ack

    def test_both_accepted_by_default_and_echoed(self):
        asked = P.Caps.ZERO_EXTENTS | P.Caps.ZSTD
        _, ack = self.connect(asked)
        self.assertEqual(asked, P.Caps(ack.caps) & asked)
        _, dack = self.connect(asked, P.Role.DATA, ack.epoch)
        self.assertEqual(ack.caps & asked, dack.caps & asked)

    def test_only_what_was_asked(self):
        _, ack = self.connect(P.Caps.ZERO_EXTENTS)
        self.assertEqual(P.Caps.ZERO_EXTENTS,
                         P.Caps(ack.caps) & (P.Caps.ZERO_EXTENTS |
                                             P.Caps.ZSTD))

    def test_without_zstandard_no_zstd(self):
        self.server.accept_caps = P.Caps.ZERO_EXTENTS
        _, ack = self.connect(P.Caps.ZERO_EXTENTS | P.Caps.ZSTD)
        self.assertFalse(ack.caps & P.Caps.ZSTD)
        self.assertTrue(ack.caps & P.Caps.ZERO_EXTENTS)

    def test_unnegotiated_zero_blocks_refused(self):
        """A source that sends ZERO_BLOCKS the sink did not accept: the
        data connection is closed with a protocol error.
        """
        conn, ack = self.connect(P.Caps.NONE)
        conn.send(P.NewFile(0, P.FileFlags.NO_SHA512, 1 << 20, 0, 0o644,
                            self.cfg.object_size, bytes(64), "z.img"))
        self.assertEqual(P.FileStatus.OPEN,
                         conn.recv(expect=(P.MsgType.FILE_ID,)).status)
        data, _ = self.connect(P.Caps.NONE, P.Role.DATA, ack.epoch)
        data.send(P.ZeroBlocks(0, 0, 4))
        err = conn.recv(expect=(P.MsgType.ERROR,))
        self.assertIn("ZERO_BLOCKS", err.message)


class TestZeroExtents(DataTestCase):

    def test_fresh_copy_left_a_hole_and_reported(self):
        spied = []
        real = os.posix_fallocate
        self.useFixture(fixtures.MonkeyPatch(
            "os.posix_fallocate",
            lambda *a: spied.append(a) or real(*a)))
        f = self.announce(64, flags=P.FileFlags.NO_SHA512)
        self.assertEqual([], spied, "a zero-extents session preallocated")
        self.write_data(f, 0)
        self.zero(f, 1, 63)
        self.drain()
        self.session._sync_now()
        syncs = self.control.wait_for(P.MsgType.BLOCK_SYNC)
        ranges = sorted(r for m in syncs for r in m.iter_ranges())
        self.assertEqual([(0, 0, 64)], ranges)
        self.assertEqual(64, f.durable.prefix())
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        path = os.path.join(self.root, "h.img")
        st = os.stat(path)
        self.assertEqual(64 * OBJ, st.st_size)
        # One object's blocks (and some file-system slack), not 64.
        self.assertLess(st.st_blocks * 512, 4 * OBJ)
        with open(path, "rb") as fh:
            self.assertEqual(self.data(0) + bytes(63 * OBJ), fh.read())

    def test_old_bytes_punched(self):
        """A resumed copy may hold older bytes where the zero extent is:
        they are punched out (the region reads zeros, its blocks freed).
        """
        f = self.announce(8, flags=P.FileFlags.NO_SHA512)
        for i in range(7):
            self.write_data(f, i)
        self.drain()
        self.session._sync_now()
        self.control.wait_for(P.MsgType.BLOCK_SYNC)
        self.session.close("reconnect")
        # The next session resumes it (objects 0..1 reported done).
        done = bitmap.Bitmap(8)
        done.add_range(0, 2)
        self.session = sinksession.SinkSession(
            self.server, P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0,
                                   0, bytes.fromhex(self.record.transfer_id),
                                   0, OBJ, 1, os.urandom(32), "source"),
            self.control, 2, tcp.TcpSinkPlane(), self.record, self.caps)
        self.addCleanup(self.session.close, "test over")
        f = self.announce(8, flags=P.FileFlags.NO_SHA512, done=done)
        self.assertFalse(f.fresh)
        before = os.fstat(f.fd).st_blocks
        self.zero(f, 2, 5)
        self.drain()
        self.assertEqual(bytes(5 * OBJ), os.pread(f.fd, 5 * OBJ, 2 * OBJ))
        self.assertEqual(self.data(1), os.pread(f.fd, OBJ, OBJ))
        self.assertLess(os.fstat(f.fd).st_blocks, before)

    def test_written_then_zero_punched_in_a_fresh_copy(self):
        f = self.announce(4, flags=P.FileFlags.NO_SHA512)
        self.write_data(f, 2)
        self.drain()
        self.zero(f, 2, 1)
        self.drain()
        self.assertEqual(bytes(OBJ), os.pread(f.fd, OBJ, 2 * OBJ))

    def test_punch_unsupported_writes_zeros(self):
        fd = os.open(os.path.join(self.root, "p"), os.O_RDWR | os.O_CREAT)
        self.addCleanup(os.close, fd)
        os.pwrite(fd, b"x" * 3 * OBJ, 0)

        def no_punch(*args):
            import ctypes
            ctypes.set_errno(95)        # EOPNOTSUPP
            return -1
        self.useFixture(fixtures.MonkeyPatch(
            "dtn_migrate.transfer.sink.recv._fallocate", lambda: no_punch))
        self.assertFalse(sinkrecv.punch_hole(fd, OBJ, OBJ + 5))
        self.assertEqual(b"x" * OBJ + bytes(OBJ + 5) + b"x" * (OBJ - 5),
                         os.pread(fd, 3 * OBJ, 0))

    def test_extent_beyond_the_file_refused(self):
        self.announce(4, flags=P.FileFlags.NO_SHA512)
        e = self.assertRaises(errors.BoundsError,
                              self.session._zero_blocks,
                              P.ZeroBlocks(0, 2, 3))
        self.assertIn("beyond the 4 objects", str(e))

    def test_zero_extent_for_unknown_file_refused(self):
        self.assertRaises(errors.ProtocolError, self.session._zero_blocks,
                          P.ZeroBlocks(7, 0, 1))

    def test_hash_covers_the_zeros(self):
        f = self.announce(6)
        content = self.data(0) + bytes(4 * OBJ) + self.data(5)
        self.zero(f, 1, 4)
        self.write_data(f, 5)
        self.write_data(f, 0)
        self.declare(f, self.expected(content))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual([], self.reads, "the sink read its copy back")
        with open(os.path.join(self.root, "h.img"), "rb") as fh:
            self.assertEqual(content, fh.read())


class TestDecode(testcase.TestCase):

    def test_exact(self):
        data = os.urandom(1000) + bytes(50000)
        wire = zstandard.ZstdCompressor().compress(data)
        out = bytearray(len(data))
        self.assertTrue(sinkrecv.decode_into(wire, memoryview(out),
                                             len(data)))
        self.assertEqual(data, out)

    def test_bomb_bounded(self):
        """A frame that decodes to far more than the object's length:
        refused after writing at most ``length`` bytes.
        """
        wire = zstandard.ZstdCompressor().compress(bytes(64 << 20))
        out = bytearray(1024 + 16)
        self.assertFalse(sinkrecv.decode_into(wire, memoryview(out), 1024))
        self.assertEqual(bytes(16), out[1024:])

    def test_short_truncated_and_garbage(self):
        data = os.urandom(4000)
        wire = zstandard.ZstdCompressor().compress(data)
        out = memoryview(bytearray(8000))
        self.assertFalse(sinkrecv.decode_into(wire, out, 5000))
        self.assertFalse(sinkrecv.decode_into(wire[:len(wire) // 2], out,
                                              4000))
        self.assertFalse(sinkrecv.decode_into(os.urandom(300), out, 4000))


class TestCompressedObjects(DataTestCase):

    def block_z(self, f, index, data, wire=None, xxh=None):
        wire = wire if wire is not None else \
            zstandard.ZstdCompressor().compress(data)
        msg = P.NewBlockZ(f.file_id, index, index * OBJ, len(data),
                          checksum.xxh3(data) if xxh is None else xxh,
                          P.Encoding.ZSTD, len(wire))
        buf = self.session.pool.acquire(timeout=5)
        self.addCleanup(self.session.pool.release, buf)
        return self.session._decode_object(msg, memoryview(wire), buf,
                                           None), buf

    def test_good_object_decoded_into_the_pooled_buffer(self):
        f = self.announce(2, flags=P.FileFlags.NO_SHA512)
        data = b"abc" * (OBJ // 3) + b"a" * (OBJ % 3)
        damage, buf = self.block_z(f, 0, data)
        self.assertIsNone(damage)
        self.assertEqual(data, bytes(buf.view[:OBJ]))

    def test_damaged_bytes_nacked(self):
        f = self.announce(2, flags=P.FileFlags.NO_SHA512)
        data = b"abc" * (OBJ // 3) + b"a" * (OBJ % 3)
        wire = bytearray(zstandard.ZstdCompressor().compress(data))
        wire[len(wire) // 2] ^= 0x40
        damage, _ = self.block_z(f, 0, data, bytes(wire))
        self.assertEqual(errors.Code.CHECKSUM, damage[0])
        damage, _ = self.block_z(f, 0, data, b"\x28\xb5\x2f\xfd" + bytes(9))
        self.assertEqual(errors.Code.CHECKSUM, damage[0])
        damage, _ = self.block_z(f, 0, data, xxh=1)
        self.assertEqual((errors.Code.CHECKSUM, "checksum"), damage)


class TestSparseWrite(DataTestCase):
    """A decoded object written into a hole: only its pages that are
    not all zero (the hole stays one).
    """

    def sparse_object(self):
        data = bytearray(OBJ)
        data[5000:9000] = b"x" * 4000          # pages 1 and 2
        data[-10:] = b"y" * 10                 # the last page
        return bytes(data)

    def test_data_runs(self):
        buf = memoryview(bytearray(self.sparse_object()))
        self.assertEqual([(4096, 12288), (OBJ - 4096, OBJ)],
                         sinkrecv.data_runs(buf, OBJ))
        self.assertEqual([], sinkrecv.data_runs(memoryview(bytearray(OBJ)),
                                                OBJ))
        self.assertEqual([(0, 100)], sinkrecv.data_runs(
            memoryview(bytearray(b"z" * 100)), 100))

    def test_decoded_object_keeps_the_hole(self):
        nobj = 32
        f = self.announce(nobj, flags=P.FileFlags.NO_SHA512)
        content = self.sparse_object()
        for i in range(nobj):
            buf = self.session.pool.acquire(timeout=5)
            buf.view[:OBJ] = content
            self.assertTrue(self.session._submit(
                f, self.session._write, f, i, i * OBJ, buf, OBJ, True))
            self.drain()
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        path = os.path.join(self.root, "h.img")
        with open(path, "rb") as fh:
            self.assertEqual(content * nobj, fh.read())
        # 3 pages of data per object, not 16.
        self.assertLess(os.stat(path).st_blocks * 512, nobj * 16 << 10)

    def test_old_bytes_overwritten_whole(self):
        """Where the region was written before, the zero pages are
        written too.
        """
        f = self.announce(2, flags=P.FileFlags.NO_SHA512)
        self.write_data(f, 0)
        self.drain()
        buf = self.session.pool.acquire(timeout=5)
        buf.view[:OBJ] = self.sparse_object()
        self.session._submit(f, self.session._write, f, 0, 0, buf, OBJ, True)
        self.drain()
        self.assertEqual(self.sparse_object(), os.pread(f.fd, OBJ, 0))


class TestPrefixHash(DataTestCase):

    def content(self, n):
        return b"".join(self.data(i) for i in range(n))

    def test_in_order_never_reads_back(self):
        f = self.announce(8)
        for i in range(8):
            self.write_data(f, i)
            self.drain()
        self.declare(f, self.expected(self.content(8)))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual([], self.reads)

    def test_out_of_order_held_for_the_hasher(self):
        self.session.hold_limit = 5
        f = self.announce(6)
        for i in (3, 5, 1, 4, 2, 0):
            self.write_data(f, i)
            self.drain()
        self.declare(f, self.expected(self.content(6)))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual([], self.reads)
        self.assertEqual(0, self.session.held_count)

    def test_beyond_the_hold_limit_only_the_gaps_read_back(self):
        self.session.hold_limit = 2
        f = self.announce(8)
        for i in (1, 2, 3, 4, 5, 0, 6, 7):
            self.write_data(f, i)
            self.drain()
        self.declare(f, self.expected(self.content(8)))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        # 1 and 2 were held; 3, 4, 5 released and read back; 0, 6, 7 not.
        self.assertEqual([3 * OBJ, 4 * OBJ, 5 * OBJ], self.reads)
        self.assertEqual(0, self.session.held_count)

    def test_copy_of_an_object_being_hashed_goes_back_to_the_pool(self):
        """A resent copy of the object the hasher is on arrives while
        it hashes: it is held, then released, not kept for good.
        """
        f = self.announce(3)
        with self.session.lock:
            f.hashing = True            # the hasher is busy with object 0
        self.write_data(f, 0)
        self.drain()
        buf = self.session.pool.acquire(timeout=5)
        buf.view[:OBJ] = self.data(0)
        f.hasher.update(buf.view[:OBJ])     # object 0 hashed meanwhile
        self.session.pool.release(buf)
        self.assertEqual(1, self.session.held_count)
        with self.session.lock:
            f.hashing = False
        for i in (1, 2):
            self.write_data(f, i)
            self.drain()
        self.assertEqual(0, self.session.held_count)
        self.declare(f, self.expected(b"".join(self.data(i)
                                               for i in range(3))))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual(0, self.session.pool.in_use)

    def test_mismatch_still_detected(self):
        f = self.announce(3)
        for i in range(3):
            self.write_data(f, i)
        self.declare(f, self.expected(b"not this"))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.MISMATCH, close.status)

    def test_failed_file_releases_held_buffers(self):
        f = self.announce(4)
        self.write_data(f, 2)
        self.write_data(f, 3)
        self.drain()
        self.assertEqual(2, self.session.held_count)
        self.session._fail(f, OSError(5, "boom"))
        self.assertEqual(0, self.session.held_count)
        self.assertEqual(0, self.session.pool.in_use)

    def test_resume_reads_only_past_the_checkpoint(self):
        self.server.cfg.hash_checkpoint_bytes = 2 * OBJ
        f = self.announce(8)
        for i in range(5):
            self.write_data(f, i)
        self.drain()
        self.session._sync_now()
        self.control.wait_for(P.MsgType.BLOCK_SYNC)
        self.drain()
        self.assertEqual(4 * OBJ, f.saved_ckpt)
        # The agent dies (no orderly close: its state is what it saved).
        os.close(f.fd)
        f.fd = None
        del self.reads[:]
        done = bitmap.Bitmap(8)
        done.add_range(0, 5)
        self.session = sinksession.SinkSession(
            self.server, P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0,
                                   0, bytes.fromhex(self.record.transfer_id),
                                   0, OBJ, 1, os.urandom(32), "source"),
            self.control, 2, tcp.TcpSinkPlane(), self.record, self.caps)
        self.addCleanup(self.session.close, "test over")
        f = self.announce(8, done=done)
        # Resumed at the checkpoint (object 4 is read back meanwhile).
        self.assertGreaterEqual(f.hasher.offset, 4 * OBJ)
        for i in range(5, 8):
            self.write_data(f, i)
            self.drain()
        self.declare(f, self.expected(self.content(8)))
        del self.events[:]
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        self.assertEqual([4 * OBJ], self.reads)

    def test_checkpoint_waits_for_durability(self):
        """A state taken past the durable prefix is saved only once the
        prefix reaches it (a restart compares the two).
        """
        self.server.cfg.hash_checkpoint_bytes = 2 * OBJ
        f = self.announce(4)
        self.write_data(f, 0)
        self.write_data(f, 1)
        self.drain()
        self.assertEqual(0, f.saved_ckpt)
        self.assertEqual(2 * OBJ, f.ckpt[0])
        sidecar = os.path.join(self.root, ".dtn-partial",
                               self.session.transfer_id, f.sidecar)
        self.assertFalse(os.path.exists(sidecar))
        self.session._sync_now()
        self.assertTrue(os.path.exists(sidecar))
        self.assertEqual(2 * OBJ, f.saved_ckpt)


class TestSmallFiles(DataTestCase):

    caps = P.Caps.NONE

    def test_small_file_not_preallocated_nor_checkpointed(self):
        spied = []
        self.useFixture(fixtures.MonkeyPatch(
            "os.posix_fallocate", lambda *a: spied.append(a)))
        unlinked = []
        real_unlink = os.unlink
        self.useFixture(fixtures.MonkeyPatch(
            "os.unlink", lambda n, **kw: unlinked.append(n) or
            real_unlink(n, **kw)))
        f = self.announce(2, name="small.img")
        self.assertEqual([], spied)
        for i in range(2):
            self.write_data(f, i)
        self.declare(f, self.expected(self.data(0) + self.data(1)))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        # Once, when the copy was created (a stale checkpoint may not
        # outlive it), not again at its installation.
        self.assertEqual(1, unlinked.count(f.sidecar))

    def test_completed_in_one_sync_batch(self):
        """The batch that makes a file's last objects durable also makes
        its installed name durable and reports it: no second batch (and
        no COMPLETE_SYNC_DELAY) per file.
        """
        f = self.announce(2, name="one.img")
        for i in range(2):
            self.write_data(f, i)
        self.declare(f, self.expected(self.data(0) + self.data(1)))
        self.drain()
        self.session._sync_now()
        # Done when that batch returns (not a delayed batch later).
        self.assertEqual("done", f.state)
        closes = self.control.wait_for(P.MsgType.FILE_CLOSE, timeout=2)
        self.assertEqual([P.CloseStatus.OK], [c.status for c in closes])
        self.assertTrue(os.path.exists(os.path.join(self.root, "one.img")))

    def test_large_file_preallocated(self):
        spied = []
        self.useFixture(fixtures.MonkeyPatch(
            "os.posix_fallocate", lambda *a: spied.append(a)))
        self.server.memory_fs = False
        self.session.preallocate = True
        self.announce(sinksession.PREALLOCATE_MIN // OBJ,
                      flags=P.FileFlags.NO_SHA512)
        self.assertEqual(1, len(spied))


class TestDirectWrites(DataTestCase):
    """Whole objects go to the file with O_DIRECT, past the page cache;
    the short last object, and everything where the file system refuses
    direct I/O, through the ordinary descriptor.
    """

    caps = P.Caps.NONE

    def setUp(self):
        super().setUp()
        probe = os.path.join(self.root, "probe")
        fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o600)
        dfd = direct.reopen(fd)
        os.close(fd)
        if dfd is None:
            self.skipTest("%s takes no O_DIRECT here" % self.root)
        os.close(dfd)
        self.writes = []
        real = os.pwrite

        def pwrite(fd, data, offset):
            self.writes.append((fd, offset, len(data)))
            return real(fd, data, offset)
        self.useFixture(fixtures.MonkeyPatch("os.pwrite", pwrite))

    def test_whole_objects_written_direct(self):
        f = self.announce(4)
        self.assertIsNotNone(f.dfd)
        for i in (2, 0, 3, 1):
            self.write_data(f, i)
        self.drain()
        self.assertEqual(sorted((f.dfd, i * OBJ, OBJ) for i in range(4)),
                         sorted(self.writes))
        content = b"".join(self.data(i) for i in range(4))
        self.declare(f, self.expected(content))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status, close)
        with open(os.path.join(self.root, "h.img"), "rb") as fh:
            self.assertEqual(content, fh.read())
        self.assertIsNone(f.dfd)      # closed with the file

    def test_short_last_object_through_the_page_cache(self):
        size = OBJ + 1000
        msg = P.NewFile(0, P.FileFlags.NONE, size, 0, 0o644, OBJ, bytes(64),
                        "short.img", b"")
        self.assertEqual(P.FileStatus.OPEN,
                         self.session._open_file(msg).status)
        f = self.session.files[0]
        content = self.data(0) + self.data(1)[:1000]
        for i, (offset, length) in enumerate(((0, OBJ), (OBJ, 1000))):
            buf = self.session.pool.acquire(timeout=5)
            buf.view[:length] = content[offset:offset + length]
            self.session._submit(f, self.session._write, f, i, offset, buf,
                                 length)
        self.drain()
        self.assertEqual({(f.dfd, 0, OBJ), (f.fd, OBJ, 1000)},
                         set(self.writes))
        self.declare(f, self.expected(content))
        self.assertEqual(P.CloseStatus.OK, self.finish(f).status)
        with open(os.path.join(self.root, "short.img"), "rb") as fh:
            self.assertEqual(content, fh.read())

    def test_refused_once_then_page_cache_for_the_file(self):
        f = self.announce(3)
        refused = test_direct.refuse_direct(self, "pwrite", lambda: f.dfd)
        self.write_data(f, 0)
        self.drain()
        for i in (1, 2):
            self.write_data(f, i)
        self.drain()
        self.assertEqual([0], refused)
        self.assertTrue(f.direct_refused)
        self.assertEqual({f.fd}, {w[0] for w in self.writes})
        content = b"".join(self.data(i) for i in range(3))
        self.declare(f, self.expected(content))
        self.assertEqual(P.CloseStatus.OK, self.finish(f).status)

    def test_off_by_configuration(self):
        self.cfg.direct_io = False
        f = self.announce(2)
        self.assertIsNone(f.dfd)
        for i in range(2):
            self.write_data(f, i)
        self.drain()
        self.assertEqual({f.fd}, {w[0] for w in self.writes})


class TestListener(DataTestCase):

    def test_durable_and_done_events_without_locks(self):
        free = []

        def listen(tid, name):
            self.notified.append((tid, name))
            # Another thread can take every sink lock meanwhile.
            got = []

            def probe():
                for lock in (self.session.lock, self.session.sync_lock,
                             self.server.lock):
                    ok = lock.acquire(timeout=2)
                    got.append(ok)
                    if ok:
                        lock.release()
            t = threading.Thread(target=probe)
            t.start()
            t.join()
            free.append(all(got))
        self.record.listener = listen
        f = self.announce(2)
        opened = len(self.notified)
        self.assertGreaterEqual(opened, 1)
        self.write_data(f, 0)
        self.drain()
        self.session._sync_now()
        self.control.wait_for(P.MsgType.BLOCK_SYNC)
        self.assertGreater(len(self.notified), opened)
        self.assertEqual(OBJ, self.server_watermark(f)["durable"])
        self.write_data(f, 1)
        self.declare(f, self.expected(self.data(0) + self.data(1)))
        self.finish(f)
        self.assertEqual("done", self.server_watermark(f)["state"])
        self.assertTrue(self.server_watermark(f)["verified"])
        self.assertTrue(all(free), free)
        self.assertEqual({(self.record.transfer_id, "h.img")},
                         set(self.notified))

    def server_watermark(self, f):
        with self.server.lock:
            self.server.records[self.record.transfer_id] = self.record
        return self.server.watermark(self.record.transfer_id, f.name)

    def test_failed_listener_does_not_break_the_sink(self):
        def boom(tid, name):
            raise RuntimeError("boom")
        self.record.listener = boom
        f = self.announce(1)
        self.write_data(f, 0)
        self.declare(f, self.expected(self.data(0)))
        close = self.finish(f)
        self.assertEqual(P.CloseStatus.OK, close.status)
