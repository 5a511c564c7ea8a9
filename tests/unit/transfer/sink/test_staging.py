"""What a peer may do to the sink's staging root (issue 36, items 5 and
9): names held to the session's own transfer, a staging quota per peer,
stray partial copies swept.
"""

import os
import shutil
import tempfile
import time

import fixtures

from dtn_migrate.common import staged
from dtn_migrate.transfer import config
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.sink import quota as sinkquota
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.sink import session as sinksession
from dtn_migrate.transfer.transport import tcp
from dtn_migrate.transfer.wire import protocol as P
from tests.unit import testcase
from tests.unit.transfer.sink import test_session as base

OBJ = base.OBJ
KEY = base.KEY
PEER = "source"


class StagingTestCase(testcase.TestCase):
    """A sink (not listening) and sessions of its peer ``source``."""

    mode = paths.MIGRATION
    limits = None

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level=20))
        self.root = tempfile.mkdtemp(prefix="dtnm-sinkstaging-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.cfg = config.TransferConfig(
            object_size=OBJ, sync_bytes=1 << 40, sync_interval=3600,
            min_free_bytes=0, buffer_pool_bytes=8 * OBJ)
        self.held = []
        self.server = sink.SinkServer(
            self.root, self.cfg, "sink", lambda peer: KEY,
            names=lambda peer: (self.mode, staged.LEAVES),
            quota=(lambda peer: self.limits) if self.limits else None,
            held=lambda peer: self.held)
        self.addCleanup(self.server.stop)

    def session(self, tid=None, peer=PEER):
        tid = tid or os.urandom(16)
        connect = P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0, tid,
                            0, OBJ, 1, os.urandom(32), peer)
        rec = self.server.records.setdefault(
            tid.hex(), sink.TransferRecord(tid.hex(), peer))
        session = sinksession.SinkSession(
            self.server, connect, base.FakeControl([]), 1,
            tcp.TcpSinkPlane(), rec)
        self.addCleanup(session.close, "test over")
        return session

    @staticmethod
    def announce(session, name, size=2 * OBJ, file_id=0):
        return session._open_file(P.NewFile(
            file_id, P.FileFlags.NO_SHA512, size, 0, 0o644, OBJ, bytes(64),
            name))

    def final(self, tid, leaf, data):
        """A final file of another transfer (``tid`` hex)."""
        os.makedirs(os.path.join(self.root, tid), exist_ok=True)
        path = os.path.join(self.root, tid, leaf)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def partials(self, tid):
        try:
            return sorted(os.listdir(os.path.join(
                self.root, paths.PARTIAL_DIR, tid)))
        except FileNotFoundError:
            return []


class TestOwnTransferOnly(StagingTestCase):

    def assertRefused(self, reply, code=errors.Code.BAD_NAME):
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertEqual(code, reply.code, reply)

    def test_another_transfers_descriptor_and_data_refused(self):
        victim = os.urandom(16).hex()
        desc = self.final(victim, staged.DESCRIPTOR, b'{"name": "mine"}')
        data = self.final(victim, staged.DATA, b"x" * 5000)
        before = {p: os.stat(p) for p in (desc, data)}
        s = self.session()
        for file_id, leaf in enumerate(staged.LEAVES):
            reply = self.announce(s, staged.staged_name(victim, leaf),
                                  file_id=file_id)
            self.assertRefused(reply)
            self.assertIn("not a file in this transfer's directory",
                          reply.message)
        with open(desc, "rb") as f:
            self.assertEqual(b'{"name": "mine"}', f.read())
        with open(data, "rb") as f:
            self.assertEqual(b"x" * 5000, f.read())
        for p, st in before.items():
            self.assertEqual((st.st_ino, st.st_mtime_ns),
                             (os.stat(p).st_ino, os.stat(p).st_mtime_ns))
        # Nothing written for them, nothing opened.
        self.assertEqual([], self.partials(s.transfer_id))
        self.assertEqual([], self.partials(victim))
        self.assertEqual({}, s.files)
        refused = "%s/image.json" % victim
        self.assertIn("from %s: refusing %r" % (PEER, refused),
                      self.log.output)

    def test_other_names_refused(self):
        s = self.session()
        tid = s.transfer_id
        hostile = ["../image.json", "/etc/passwd", "%s/../x/image.json" % tid,
                   "%s/other.bin" % tid, "%s/sub/image.json" % tid, tid,
                   staged.DESCRIPTOR, "%s/image.json/x" % tid,
                   "%s/%s/image.data" % (paths.PARTIAL_DIR, tid),
                   "%s/image.json" % tid.upper(), "a/b.raw"]
        for file_id, name in enumerate(hostile):
            self.assertRefused(self.announce(s, name, file_id=file_id))
        self.assertEqual({}, s.files)
        self.assertEqual([], self.partials(tid))
        self.assertEqual([paths.PARTIAL_DIR], os.listdir(self.root))

    def test_own_files_accepted(self):
        s = self.session()
        for file_id, leaf in enumerate(staged.LEAVES):
            reply = self.announce(s, staged.staged_name(s.transfer_id, leaf),
                                  file_id=file_id)
            self.assertEqual(P.FileStatus.OPEN, reply.status, reply)

    def test_transfer_mode_allows_any_file_under_the_transfer(self):
        self.mode = paths.TRANSFER
        s = self.session()
        reply = self.announce(s, "%s/sub/disk.raw" % s.transfer_id)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        self.assertRefused(self.announce(
            s, "%s/image.json" % os.urandom(16).hex(), file_id=1))
        self.assertRefused(self.announce(s, "top.raw", file_id=2))

    def test_any_mode_still_refuses_other_transfers(self):
        self.mode = paths.ANY
        victim = os.urandom(16).hex()
        path = self.final(victim, staged.DESCRIPTOR, b"{}")
        s = self.session()
        self.assertEqual(P.FileStatus.OPEN,
                         self.announce(s, "dir/file.raw").status)
        reply = self.announce(s, "%s/image.json" % victim, file_id=1)
        self.assertRefused(reply)
        self.assertIn("directory of another transfer", reply.message)
        with open(path, "rb") as f:
            self.assertEqual(b"{}", f.read())


class TestQuota(StagingTestCase):

    limits = sinkquota.Limits(5 * OBJ, 3, "[peer:source] staging_quota_bytes",
                              "[peer:source] staging_quota_files")

    def test_bytes_quota_refused_before_writing(self):
        earlier = os.urandom(16).hex()
        self.held.append(earlier)
        self.final(earlier, staged.DATA, b"d" * (3 * OBJ))
        s = self.session()
        name = staged.staged_name(s.transfer_id, staged.DATA)
        reply = self.announce(s, name, size=3 * OBJ)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertEqual(errors.Code.LIMIT, reply.code)
        self.assertIn("more than its quota of %d bytes" % (5 * OBJ),
                      reply.message)
        self.assertIn("raise [peer:source] staging_quota_bytes",
                      reply.message)
        self.assertEqual([], self.partials(s.transfer_id))
        # Within it: accepted (the descriptor is small).
        reply = self.announce(s, staged.staged_name(s.transfer_id,
                                                    staged.DESCRIPTOR),
                              size=OBJ, file_id=1)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)
        # Once the earlier transfer is imported and removed, the next
        # session fits.
        shutil.rmtree(os.path.join(self.root, earlier))
        s.close("done")
        s2 = self.session(bytes.fromhex(s.transfer_id))
        reply = self.announce(s2, name, size=3 * OBJ)
        self.assertEqual(P.FileStatus.OPEN, reply.status, reply)

    def test_concurrent_sessions_share_the_quota(self):
        first, second = self.session(), self.session()
        self.assertEqual(P.FileStatus.OPEN, self.announce(
            first, "%s/image.data" % first.transfer_id, 3 * OBJ).status)
        reply = self.announce(second, "%s/image.data" % second.transfer_id,
                              3 * OBJ)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        # Another peer has a quota of its own.
        other = self.session(peer="other")
        self.assertEqual(P.FileStatus.OPEN, self.announce(
            other, "%s/image.data" % other.transfer_id, 3 * OBJ).status)

    def test_files_quota(self):
        for _ in range(3):
            tid = os.urandom(16).hex()
            self.held.append(tid)
            self.final(tid, staged.DESCRIPTOR, b"{}")
        s = self.session()
        reply = self.announce(s, "%s/image.json" % s.transfer_id, 100)
        self.assertEqual(P.FileStatus.REFUSED, reply.status, reply)
        self.assertIn("more than its quota of 3 files; raise "
                      "[peer:source] staging_quota_files", reply.message)

    def test_resumed_file_counted_once(self):
        s = self.session()
        name = "%s/image.data" % s.transfer_id
        self.assertEqual(P.FileStatus.OPEN,
                         self.announce(s, name, 4 * OBJ).status)
        s.close("interrupted")
        # Its partial copy (4 objects) is counted by the next session,
        # and reopening it costs nothing more.
        s2 = self.session(bytes.fromhex(s.transfer_id))
        reply = self.announce(s2, name, 4 * OBJ)
        self.assertIn(reply.status, (P.FileStatus.OPEN, P.FileStatus.RESET))


class TestRoomFor(StagingTestCase):
    """A preflight asks the sink, before the first byte, whether a
    transfer would fit (issue 37, 3): the checks its files meet on
    arrival, nothing charged.
    """

    limits = TestQuota.limits

    def test_within_the_quota(self):
        tid = os.urandom(16).hex()
        self.server.room_for(PEER, tid, 4 * OBJ)
        # Asking charged nothing: the transfer's files still fit.
        s = self.session(bytes.fromhex(tid))
        self.assertEqual(P.FileStatus.OPEN, self.announce(
            s, staged.staged_name(tid, staged.DATA), 4 * OBJ).status)

    def test_over_the_bytes_quota_as_its_files_would_be(self):
        earlier = os.urandom(16).hex()
        self.held.append(earlier)
        self.final(earlier, staged.DATA, b"d" * (3 * OBJ))
        exc = self.assertRaises(sinkquota.QuotaError, self.server.room_for,
                                PEER, os.urandom(16).hex(), 3 * OBJ)
        self.assertIn("more than its quota of %d bytes; raise "
                      "[peer:source] staging_quota_bytes" % (5 * OBJ),
                      str(exc))

    def test_over_the_files_quota(self):
        for _ in range(2):
            tid = os.urandom(16).hex()
            self.held.append(tid)
            self.final(tid, staged.DESCRIPTOR, b"{}")
        exc = self.assertRaises(sinkquota.QuotaError, self.server.room_for,
                                PEER, os.urandom(16).hex(), OBJ)
        self.assertIn("more than its quota of 3 files", str(exc))

    def test_what_the_transfer_holds_already_counts_as_room(self):
        # A retried transfer: its partial copy is replaced, not added.
        s = self.session()
        self.assertEqual(P.FileStatus.OPEN, self.announce(
            s, staged.staged_name(s.transfer_id, staged.DATA),
            4 * OBJ).status)
        s.close("interrupted")
        self.server.room_for(PEER, s.transfer_id, 4 * OBJ)
        self.assertRaises(sinkquota.QuotaError, self.server.room_for,
                          PEER, os.urandom(16).hex(), 4 * OBJ)

    def test_more_than_the_free_space(self):
        self.server.quota = None
        free = sinkroom_free(self.root)
        exc = self.assertRaises(errors.NoSpaceError, self.server.room_for,
                                PEER, None, free + 1)
        self.assertIn("not enough space for transfer of %d bytes: needs "
                      "%d bytes (+0 reserve)" % (free + 1, free + 1),
                      str(exc))

    def test_a_bad_transfer_id(self):
        for tid in ("../x", "AB" * 16, "ab"):
            self.assertRaises(ValueError, self.server.room_for, PEER, tid,
                              OBJ)


def sinkroom_free(path):
    vfs = os.statvfs(path)
    return vfs.f_bavail * vfs.f_frsize


class TestSweep(StagingTestCase):

    def stray(self, age):
        s = self.session()
        self.assertEqual(P.FileStatus.OPEN, self.announce(
            s, "%s/image.data" % s.transfer_id).status)
        s.close("source gone")
        pdir = os.path.join(self.root, paths.PARTIAL_DIR, s.transfer_id)
        then = time.time() - age
        for name in os.listdir(pdir) + [""]:
            os.utime(os.path.join(pdir, name), (then, then))
        self.server.records[s.transfer_id].active = False
        return s.transfer_id

    def test_old_strays_removed_recent_and_active_kept(self):
        old, recent = self.stray(7200), self.stray(60)
        kept = self.final(old, staged.DESCRIPTOR, b"{}")
        running = self.session()
        self.announce(running, "%s/image.data" % running.transfer_id)
        pdir = os.path.join(self.root, paths.PARTIAL_DIR,
                            running.transfer_id)
        then = time.time() - 7200
        os.utime(pdir, (then, then))
        self.assertEqual([old], self.server.sweep_strays(3600))
        self.assertFalse(os.path.exists(os.path.join(
            self.root, paths.PARTIAL_DIR, old)))
        self.assertNotEqual([], self.partials(recent))
        self.assertNotEqual([], self.partials(running.transfer_id))
        # Final files are not the sweep's.
        self.assertTrue(os.path.exists(kept))
        self.assertIn("removed 2 stray partial files of transfer %s" % old,
                      self.log.output)

    def test_a_session_waits_for_its_sweep(self):
        tid = self.stray(7200)
        self.server.sweeping.add(tid)
        exc = self.assertRaises(errors.ProtocolError, self.server._control,
                                FakeConn(), P.Connect(
                                    P.VERSION, P.VERSION, P.Role.CONTROL, 0,
                                    0, bytes.fromhex(tid), 0, OBJ, 1,
                                    os.urandom(32), PEER))
        self.assertEqual(errors.Code.LIMIT, exc.code)
        self.assertIn("being removed; retry", str(exc))


class FakeConn:
    peer = "fake:1"
