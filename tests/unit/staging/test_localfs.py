"""localfs: whole blocks of a staged file written and read with
O_DIRECT, the short last block and refusals through the page cache.
"""

import errno
import fcntl
import os

import fixtures

from dtn_migrate.staging import backend
from dtn_migrate.staging import localfs
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import direct
from tests.unit.transfer import test_direct
from tests.unit import testcase

BLOCK = 1 << 20


class TestDirectIO(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.be = localfs.LocalBackend(self.root)
        self.calls = test_direct.spy_io(self)
        self.data = os.urandom(3 * BLOCK + 1234)

    def stage(self, be=None):
        be = be or self.be
        with be.open_write("img") as w:
            for off in range(0, len(self.data), BLOCK):
                w.pwrite(self.data[off:off + BLOCK], off)
            w.commit()
            return w

    def test_blocks_direct_and_the_tail_through_the_cache(self):
        w = self.stage()
        writes = [c for c in self.calls if c[0] == "w"]
        self.assertEqual(4, len(writes))
        self.assertEqual(1, len({c[1] for c in writes[:3]}))
        self.assertNotEqual(writes[0][1], writes[3][1])   # the tail
        self.assertEqual((3 * BLOCK, 1234), writes[3][2:])
        self.assertIsNone(w.direct.dfd)                   # closed
        with open(os.path.join(self.root, "img"), "rb") as fh:
            self.assertEqual(self.data, fh.read())

    def test_an_aligned_block_is_written_as_it_is(self):
        # A page-aligned, writable block (the copy engine's pooled ones)
        # goes to O_DIRECT without the copy into the writer's buffer.
        block = buffers.aligned(BLOCK)
        block[:] = self.data[:BLOCK]
        with self.be.open_write("img") as w:
            w.pwrite(block, 0)
            w.pwrite(self.data[BLOCK:2 * BLOCK], BLOCK)   # bytes: copied
            self.assertEqual(BLOCK, len(w.direct.scratch))
            scratch = direct.address(w.direct.scratch)
            w.commit()
        writes = [c for c in self.calls if c[0] == "w"]
        self.assertEqual(2, len(writes))
        self.assertEqual(1, len({c[1] for c in writes}))   # both direct
        self.assertNotEqual(scratch, direct.address(block))
        with open(os.path.join(self.root, "img"), "rb") as fh:
            self.assertEqual(self.data[:2 * BLOCK], fh.read())

    def test_read_back_direct(self):
        self.stage()
        del self.calls[:]
        with self.be.open_read("img") as r:
            dfd = r.direct.dfd
            self.assertIsNotNone(dfd)
            got = b"".join(r.pread(BLOCK, off)
                           for off in range(0, len(self.data), BLOCK))
            self.assertEqual(b"", r.pread(BLOCK, 4 * BLOCK))
            self.assertEqual(self.data[10:20], r.pread(10, 10))
        self.assertEqual(self.data, got)
        self.assertEqual({dfd}, {c[1] for c in self.calls[:4]})

    def test_readinto_direct_in_place(self):
        # The import's reads: straight into a page-aligned buffer, no
        # scratch buffer and no copy; the tail too (a short direct read).
        self.stage()
        del self.calls[:]
        buf = buffers.aligned(BLOCK)
        got = []
        with self.be.open_read("img") as r:
            dfd = r.direct.dfd
            for off in range(0, len(self.data), BLOCK):
                want = min(BLOCK, len(self.data) - off)
                self.assertEqual(want, r.readinto(buf, off, want))
                got.append(bytes(buf[:want]))
            self.assertEqual(0, r.readinto(buf, len(self.data), 10))
            self.assertIsNone(r.direct.scratch)
        self.assertEqual(self.data, b"".join(got))
        self.assertEqual({dfd}, {c[1] for c in self.calls[:4]})

    def test_readinto_unaligned_through_the_cache(self):
        self.stage()
        with self.be.open_read("img") as r:
            buf = bytearray(100)
            self.assertEqual(100, r.readinto(buf, 5))
            self.assertEqual(self.data[5:105], bytes(buf))
            view = buffers.aligned(BLOCK)
            self.assertEqual(10, r.readinto(view[1:], 7, 10))
            self.assertEqual(self.data[7:17], bytes(view[1:11]))

    def test_off(self):
        be = localfs.LocalBackend(self.root, direct_io=False)
        w = self.stage(be)
        self.assertIsNone(w.direct.dfd)
        self.assertEqual(1, len({c[1] for c in self.calls}))
        with be.open_read("img") as r:
            self.assertIsNone(r.direct.dfd)
            self.assertEqual(self.data[:BLOCK], r.pread(BLOCK, 0))

    def test_refused_write_falls_back_for_good(self):
        w = self.be.open_write("img")
        self.addCleanup(w.close)
        refused = test_direct.refuse_direct(self, "pwrite",
                                            lambda: w.direct.dfd)
        for off in range(0, len(self.data), BLOCK):
            w.pwrite(self.data[off:off + BLOCK], off)
        w.commit()
        self.assertEqual([0], refused)
        self.assertIsNone(w.direct.dfd)
        with open(os.path.join(self.root, "img"), "rb") as fh:
            self.assertEqual(self.data, fh.read())

    def test_errors_are_staging_errors(self):
        def full(fd, data, offset):
            raise OSError(errno.ENOSPC, "No space left on device")
        w = self.be.open_write("img")
        self.addCleanup(w.close)
        self.useFixture(fixtures.MonkeyPatch("os.pwrite", full))
        self.assertRaises(backend.NoSpace, w.pwrite, self.data[:BLOCK], 0)

    def test_reopen_with_sync_keeps_o_dsync(self):
        w = self.be.open_write("img", sync=True)
        self.addCleanup(w.close)
        if w.direct.dfd is None:
            self.skipTest("%s takes no O_DIRECT" % self.root)
        flags = fcntl.fcntl(w.direct.dfd, fcntl.F_GETFL)
        self.assertTrue(flags & os.O_DIRECT)
        self.assertEqual(os.O_DSYNC, flags & os.O_DSYNC)
