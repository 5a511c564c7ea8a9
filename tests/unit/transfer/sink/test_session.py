"""The sink's session on its own: durability order (issue 11, item 6),
partial copies created afresh, and the bounds it keeps after
authentication (item 7).

Durability is checked with a recording spy on fsync/fdatasync: objects
may be reported durable (BLOCK_SYNC) only after their file, its name in
the partial directory and the directories above are on stable storage.
"""

import dataclasses
import hashlib
import os
import shutil
import tempfile
import threading
import time

import fixtures

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import config
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.sink import session as sinksession
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.transport import tcp
from dtn_migrate.transfer.wire import protocol as P

from tests.unit import testcase

KEY = b"k" * 32
OBJ = 64 << 10


class FakeControl:
    """The control connection as the session's outbox sees it."""

    peer = "fake:1"
    tls = False
    object_key = None

    def __init__(self, events):
        self.events = events
        self.cond = threading.Condition()

    def send(self, msg, payload=None, sendfile=None):
        with self.cond:
            self.events.append(("send", msg))
            self.cond.notify_all()

    def wait_for(self, mtype, timeout=5.0):
        with self.cond:
            self.cond.wait_for(lambda: self.sent(mtype), timeout)
            return self.sent(mtype)

    def sent(self, mtype):
        return [m for kind, m in list(self.events)
                if kind == "send" and m.TYPE == mtype]

    def shutdown(self):
        pass

    def close(self):
        pass


def inode(fd):
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def path_inode(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


class SessionTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-sinksess-")
        self.addCleanup(shutil.rmtree, self.root, True)
        # The syncer idles: the test decides when a batch is synced.
        self.cfg = config.TransferConfig(
            object_size=OBJ, sync_bytes=1 << 40, sync_interval=3600,
            min_free_bytes=0, buffer_pool_bytes=8 * OBJ)
        self.server = sink.SinkServer(self.root, self.cfg, "sink",
                                      lambda peer: KEY)
        self.addCleanup(self.server.stop)
        self.events = []
        tid = os.urandom(16)
        connect = P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0, tid,
                            0, OBJ, 1, os.urandom(32), "source")
        self.control = FakeControl(self.events)
        self.session = sinksession.SinkSession(
            self.server, connect, self.control, 1, tcp.TcpSinkPlane(),
            sink.TransferRecord(tid.hex(), "source"))
        self.addCleanup(self.session.close, "test over")
        self.spy("fsync")
        self.spy("fdatasync")

    def spy(self, name):
        real = getattr(os, name)

        def call(fd):
            self.events.append((name, inode(fd)))
            self.on_sync(fd)
            return real(fd)
        self.useFixture(fixtures.MonkeyPatch("os." + name, call))

    def on_sync(self, fd):
        """Hook: runs inside every fsync/fdatasync, before it."""

    def open_file(self, file_id, name, nobjects=2):
        reply = self.session._open_file(P.NewFile(
            file_id, P.FileFlags.NO_SHA512, nobjects * OBJ, 0, 0o644, OBJ,
            bytes(64), name))
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        return self.session.files[file_id]

    def write(self, f, index):
        buf = self.session.pool.acquire(timeout=5)
        buf.view[:OBJ] = bytes([index + 1]) * OBJ
        with self.session.lock:         # as _receive does
            f.inflight += 1
            self.session.tasks += 1
        self.session._write(f, index, index * OBJ, buf, OBJ)


class TestDurability(SessionTestCase):

    def synced_before_report(self, kind_inodes):
        sync = self.control.wait_for(P.MsgType.BLOCK_SYNC)
        self.assertTrue(sync, "no BLOCK_SYNC posted")
        report = next(i for i, (kind, m) in enumerate(self.events)
                      if kind == "send" and m.TYPE == P.MsgType.BLOCK_SYNC)
        before = {ino for kind, ino in self.events[:report]
                  if kind in ("fsync", "fdatasync")}
        for what, ino in kind_inodes:
            self.assertIn(ino, before, "%s not synced before BLOCK_SYNC"
                          % what)
        return sync

    def test_new_partial_file_and_its_directories_synced(self):
        """One new file (a batch far below SYNCFS_MIN_FILES): the file,
        the partial directory, .dtn-partial and the root are synced
        before its object is reported durable.
        """
        f = self.open_file(0, "a.img")
        file_ino = inode(f.fd)
        self.write(f, 0)
        self.session._sync_now()
        pdir = os.path.join(self.root, ".dtn-partial")
        sync = self.synced_before_report([
            ("partial file", file_ino),
            ("partial directory", inode(self.session.pdir)),
            (".dtn-partial", path_inode(pdir)),
            ("staging root", path_inode(self.root))])
        self.assertEqual([(0, 0, 1)], list(sync[0].iter_ranges()))

    def test_directory_synced_for_each_batch_of_new_files(self):
        """Every batch with a new file syncs the partial directory again
        (files announced later get new entries); a known entry is not.
        """
        f = self.open_file(0, "a.img")
        self.write(f, 0)
        self.session._sync_now()
        # The outbox sends on a thread of its own: the first report goes
        # out before the events are cleared, or it would look like the
        # second batch's, sent before any sync.
        self.control.wait_for(P.MsgType.BLOCK_SYNC)
        g = self.open_file(1, "b.img", nobjects=3)
        f_ino, g_ino = inode(f.fd), inode(g.fd)
        del self.events[:]
        self.write(g, 0)
        self.write(f, 1)
        self.session._sync_now()
        pdir = inode(self.session.pdir)
        self.synced_before_report([("new file", g_ino),
                                   ("partial directory", pdir)])
        self.assertIn(("fdatasync", f_ino), self.events)
        del self.events[:]
        self.write(g, 1)
        self.session._sync_now()
        self.control.wait_for(P.MsgType.BLOCK_SYNC)
        self.assertNotIn(("fsync", pdir), self.events)

    def test_hash_sidecar_synced_before_rename(self):
        reply = self.session._open_file(P.NewFile(
            0, P.FileFlags.NONE, 2 * OBJ, 0, 0o644, OBJ, bytes(64), "h.img"))
        self.assertEqual(P.FileStatus.OPEN, reply.status)
        f = self.session.files[0]
        f.hasher.update(b"x" * OBJ)
        renamed = []
        real_rename = os.rename

        def rename(src, dst, **kw):
            renamed.append(len(self.events))
            return real_rename(src, dst, **kw)
        self.useFixture(fixtures.MonkeyPatch("os.rename", rename))
        self.session._save_hash(f)
        tmp = [ino for kind, ino in self.events[:renamed[0]]
               if kind == "fsync"]
        sidecar = os.path.join(self.root, ".dtn-partial",
                               self.session.transfer_id, f.sidecar)
        self.assertIn(path_inode(sidecar), tmp,
                      "checkpoint renamed before it was synced")


class TestRestartDuringSync(SessionTestCase):
    """A RESTART closes a file while the syncer works through a batch
    that holds it: the other files of the batch are still reported.
    """

    closing = None

    def on_sync(self, fd):
        victim, self.closing = self.closing, None
        if victim is not None:
            # What _open_file does for a RESTART, on the control thread.
            victim.state = "replaced"
            self.session._close_file(victim)

    def test_restart_closes_a_file_of_the_batch(self):
        for round_ in range(3):
            a = self.open_file(2 * round_, "a%d.img" % round_)
            b = self.open_file(2 * round_ + 1, "b%d.img" % round_)
            self.write(a, 0)
            self.write(b, 0)
            del self.events[:]
            self.closing = b
            self.session._sync_now()
            syncs = self.control.wait_for(P.MsgType.BLOCK_SYNC)
            ranges = [r for m in syncs for r in m.iter_ranges()]
            self.assertEqual([(a.file_id, 0, 1)], ranges)
            self.assertIsNone(b.fd)
            self.assertIn(a.file_id, self.session.files)


class TestSessionBounds(testcase.TestCase):
    """Through a real sink on loopback, with an authenticated source."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-bounds-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.cfg = config.TransferConfig(object_size=256 << 10,
                                         max_open_files=3,
                                         min_free_bytes=0)
        self.server = sink.SinkServer(self.root, self.cfg, "sink",
                                      lambda peer: KEY, host="127.0.0.1")
        self.server.start()
        self.addCleanup(self.server.stop)
        self.peer = source.Peer("sink", "127.0.0.1", self.server.port, KEY)
        self.tid = os.urandom(16)

    def connect(self, role=P.Role.CONTROL, epoch=0):
        conn, ack = source.open_connection(self.peer, P.Connect(
            P.VERSION, P.VERSION, role, 0, 0, self.tid, epoch,
            self.cfg.object_size, 1, os.urandom(32), "source"), self.cfg)
        self.addCleanup(conn.close)
        return conn, ack

    def new_file(self, conn, file_id, size, object_size=None):
        conn.send(P.NewFile(file_id, P.FileFlags.NO_SHA512, size, 0, 0o644,
                            object_size or self.cfg.object_size, bytes(64),
                            "f%d.img" % file_id))
        return conn.recv(expect=(P.MsgType.FILE_ID,))

    def test_object_size_tied_to_session(self):
        """A 1 TiB NEW_FILE with 4 KiB objects in a 256 KiB session: its
        done-set bitmap would be sized by the peer's choice.
        """
        conn, _ = self.connect()
        for file_id, size in enumerate((1 << 40, 1 << 20)):
            reply = self.new_file(conn, file_id, size, object_size=4096)
            self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
            self.assertEqual(errors.Code.BOUNDS, reply.code)
            self.assertIn("differs from the session's", reply.message)
        reply = self.new_file(conn, 9, 1 << 20)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)

    def test_open_files_per_session(self):
        conn, _ = self.connect()
        for file_id in range(3):
            reply = self.new_file(conn, file_id, 1 << 20)
            self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        for file_id in range(3, 20):
            reply = self.new_file(conn, file_id, 1 << 20)
            self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
            self.assertEqual(errors.Code.LIMIT, reply.code, reply)
        session = next(iter(self.server.sessions.values()))
        self.assertEqual(3, sum(f.fd is not None
                                for f in session.files.values()))

    def test_done_set_bitmaps_per_session(self):
        """With the smallest objects a file system's worth of file
        would still size a huge done-set bitmap: the session's bitmaps
        share a budget, checked before any is allocated.
        """
        self.server.cfg.max_session_bitmap_bytes = 512      # 4096 objects
        self.server.cfg.preallocate = False                 # sparse copies
        conn, _ = self.connect()
        obj = self.cfg.object_size
        for file_id in range(3):
            # Each alone is over the budget.
            reply = self.new_file(conn, file_id, 5000 * obj)
            self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
            self.assertEqual(errors.Code.BOUNDS, reply.code, reply)
            self.assertIn("done-set bitmaps", reply.message)
        reply = self.new_file(conn, 10, 2500 * obj)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        # Together with the open one, over the budget.
        reply = self.new_file(conn, 11, 2500 * obj)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        reply = self.new_file(conn, 12, 1000 * obj)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)

    def test_new_block_length_checked_before_allocation(self):
        """Headers that claim an 8 MiB NEW_BLOCK body, on every stream of
        many sessions: each is refused at once, before its body is
        allocated or awaited.
        """
        for _ in range(5):
            self.tid = os.urandom(16)
            conn, ack = self.connect()
            data, _ = self.connect(P.Role.DATA, ack.epoch)
            data.settimeout(5.0)
            data.sock.sendall(P.HEADER.pack(P.MAGIC, P.VERSION,
                                            P.MsgType.NEW_BLOCK, 0,
                                            P.MAX_BODY, 0))
            err = conn.recv(expect=(P.MsgType.ERROR,))
            self.assertEqual(errors.Code.BOUNDS, err.code, err)
            self.assertIn("NEW_BLOCK body is %d bytes" % P.MAX_BODY,
                          err.message)

    def hold_close(self):
        """The transfer's session, and two events: ``syncing`` is set
        when its close reaches the final sync (unlisted already), which
        waits there until ``release`` is set.
        """
        session = self.server.sessions[("source", self.tid.hex())]
        syncing, release = threading.Event(), threading.Event()
        real_sync = session._sync_now

        def held_sync():
            syncing.set()
            release.wait(10)
            real_sync()
        session._sync_now = held_sync
        return session, syncing, release

    def test_overlapping_reconnections_leave_one_session(self):
        """Two reconnections of one transfer overlap: the first waits
        while the old session closes, and the second is registered
        meanwhile.  The first is refused (a retry), not registered over
        the second, which would run on, unlisted and never closed.
        """
        self.connect()
        real_close = sinksession.SinkSession.close
        waiting, go = threading.Event(), threading.Event()

        def slow_close(session, reason):
            if reason.startswith("replaced") and not waiting.is_set():
                waiting.set()
                go.wait(10)
            real_close(session, reason)
        self.useFixture(fixtures.MonkeyPatch(
            "dtn_migrate.transfer.sink.session.SinkSession.close",
            slow_close))
        stale = {}

        def reconnect():
            try:
                stale["ack"] = self.connect()[1]
            except errors.PeerError as exc:
                stale["error"] = exc
        th = threading.Thread(target=reconnect)
        th.start()
        self.assertTrue(waiting.wait(10))
        _, ack = self.connect()
        key = ("source", self.tid.hex())
        live = self.server.sessions[key]
        self.assertEqual(ack.epoch, live.epoch)
        go.set()
        th.join(10)
        self.assertNotIn("ack", stale, stale)
        self.assertEqual(errors.Code.LIMIT, stale["error"].code)
        self.assertIn("connected again", str(stale["error"]))
        self.assertIs(live, self.server.sessions[key])
        self.assertFalse(live.closed)

    def test_a_reconnection_waits_for_the_old_session_to_close(self):
        """The old session is closing itself (its connection was lost)
        when the transfer connects again: the new session starts only
        after that close has ended, or the close would remove the
        per-transfer partial directory, empty at that moment, that the
        new session has just opened.
        """
        conn, _ = self.connect()
        old, syncing, release = self.hold_close()
        removed = threading.Event()
        real_remove = self.server.root.remove_partial_dir

        def remove_partial_dir(transfer_hex):
            real_remove(transfer_hex)
            removed.set()
        self.server.root.remove_partial_dir = remove_partial_dir
        conn.close()
        self.assertTrue(syncing.wait(10))   # closing, already unlisted
        got = {}
        th = threading.Thread(target=lambda: got.update(
            conn=self.connect()[0]))
        th.start()
        th.join(0.3)
        release.set()
        self.assertTrue(removed.wait(10))
        th.join(10)
        reply = self.new_file(got["conn"], 0, 1 << 20)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        self.assertTrue(old.gone.is_set())

    def test_a_close_that_hangs_refuses_the_reconnection_for_a_retry(self):
        """The old session's close hangs (a stuck final sync): a
        reconnection waits ``handshake_timeout`` for it, then is refused
        with LIMIT, which the source retries, and nothing else changes;
        once the close ends, the next reconnection gets a session.
        """
        # The sink's wait; the source still waits 10 s for its answer.
        self.server.cfg = dataclasses.replace(self.cfg,
                                              handshake_timeout=0.3)
        conn, _ = self.connect()
        old, syncing, release = self.hold_close()
        self.addCleanup(release.set)
        conn.close()
        self.assertTrue(syncing.wait(10))
        key = ("source", self.tid.hex())
        started = time.monotonic()
        err = self.assertRaises(errors.PeerError, self.connect)
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.assertEqual(errors.Code.LIMIT, err.code)
        self.assertIn("previous session is still closing", str(err))
        self.assertNotIn(key, self.server.sessions)
        self.assertIs(old, self.server.records[self.tid.hex()].session)
        release.set()
        self.assertTrue(old.gone.wait(10))
        conn, ack = self.connect()
        self.assertIsNot(old, self.server.sessions[key])
        reply = self.new_file(conn, 0, 1 << 20)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)

    def test_many_reconnections_while_the_old_session_closes(self):
        """Five reconnections of one transfer at once, while its old
        session closes itself: each either gets a session or is refused
        (LIMIT, to retry); of the sessions made, exactly one is left
        open, the listed one, and it takes a file.
        """
        conn, _ = self.connect()
        key = ("source", self.tid.hex())
        _, syncing, release = self.hold_close()
        made = []

        class Recorded(sinksession.SinkSession):
            def __init__(session, *args, **kwargs):
                super().__init__(*args, **kwargs)
                made.append(session)
        self.useFixture(fixtures.MonkeyPatch(
            "dtn_migrate.transfer.sink.session.SinkSession", Recorded))
        conn.close()
        self.assertTrue(syncing.wait(10))
        acks, refused = [], []

        def reconnect():
            try:
                acks.append(self.connect())
            except errors.PeerError as exc:
                refused.append(exc)
        threads = [threading.Thread(target=reconnect) for _ in range(5)]
        for th in threads:
            th.start()
        threads[0].join(0.3)
        release.set()
        for th in threads:
            th.join(20)
        self.assertEqual(5, len(made) + len(refused), (made, refused))
        self.assertEqual([errors.Code.LIMIT] * len(refused),
                         [exc.code for exc in refused])
        live = self.server.sessions[key]
        self.assertEqual([live], [s for s in made if not s.closed])
        mine = [c for c, ack in acks if ack.epoch == live.epoch]
        reply = self.new_file(mine[0], 0, 1 << 20)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)


class TestUnconfirmedCopy(SessionTestCase):
    """A partial copy the sink created afresh (RESET, RESTART) holds no
    object the source may count as done until the sink has reported one
    of its own: a crash before the source heard the RESET (or logged the
    RESTART) must not let its old done set be trusted against zeros.
    """

    def announce(self, done=(), flags=P.FileFlags.NO_SHA512, nobjects=4):
        bits = bitmap.Bitmap(nobjects)
        for i in done:
            bits.add(i)
        msg = P.NewFile(0, flags, nobjects * OBJ, 0, 0o644, OBJ, bytes(64),
                        "a.img", bits.encode_runs())
        f, status = self.session._prepare(msg, ["a.img"],
                                          P.FileFlags(msg.flags))
        # The session "crashes": nothing of this file is reported.
        os.close(f.fd)
        return f, status

    def test_reset_lost_in_a_crash_is_answered_again(self):
        _, status = self.announce(done=(0, 1))
        self.assertEqual(P.FileStatus.RESET, status)
        for _ in range(3):
            # The source never heard the RESET: same done set again.
            _, status = self.announce(done=(0, 1))
            self.assertEqual(P.FileStatus.RESET, status,
                             "an old done set trusted against a copy "
                             "that holds none of it")

    def test_restart_lost_in_a_crash_is_not_trusted(self):
        part = os.path.join(self.session_dir(), self.key() + ".part")
        with open(part, "wb") as f:
            f.write(b"o" * 4 * OBJ)
        _, status = self.announce(
            flags=P.FileFlags.NO_SHA512 | P.FileFlags.RESTART)
        self.assertEqual(P.FileStatus.OPEN, status)
        # The source's log lost the RESTART: its old done set comes back.
        _, status = self.announce(done=(0, 1, 2))
        self.assertEqual(P.FileStatus.RESET, status)

    def test_reported_objects_make_the_copy_resumable(self):
        reply = self.session._open_file(P.NewFile(
            0, P.FileFlags.NO_SHA512, 4 * OBJ, 0, 0o644, OBJ, bytes(64),
            "a.img"))
        self.assertEqual(P.FileStatus.OPEN, reply.status)
        f = self.session.files[0]
        marker = os.path.join(self.session_dir(), f.key + ".new")
        self.assertTrue(os.path.exists(marker))
        removed = []
        real_unlink = os.unlink

        def unlink(name, **kw):
            removed.append(len(self.events))
            return real_unlink(name, **kw)
        self.useFixture(fixtures.MonkeyPatch("os.unlink", unlink))
        self.write(f, 0)
        self.session._sync_now()
        self.control.wait_for(P.MsgType.BLOCK_SYNC)
        self.assertFalse(os.path.exists(marker))
        # The mark went, and the directory was synced, before the report.
        report = next(i for i, (kind, m) in enumerate(self.events)
                      if kind == "send" and m.TYPE == P.MsgType.BLOCK_SYNC)
        pdir = inode(self.session.pdir)
        dir_syncs = [i for i, e in enumerate(self.events[:report])
                     if e == ("fsync", pdir)]
        self.assertTrue(removed and dir_syncs and
                        removed[0] <= dir_syncs[-1] < report, self.events)
        with self.session.lock:
            self.session._close_file(f)
            del self.session.files[0]
        _, status = self.announce(done=(0,))
        self.assertEqual(P.FileStatus.OPEN, status)

    def session_dir(self):
        return os.path.join(self.root, ".dtn-partial",
                            self.session.transfer_id)

    @staticmethod
    def key():
        return hashlib.sha256(b"a.img").hexdigest()[:40]
