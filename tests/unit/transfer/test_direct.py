"""direct: O_DIRECT where it is aligned, the page cache for the rest."""

import errno
import fcntl
import os
import shutil
import tempfile

import fixtures

from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import direct
from dtn_migrate.transfer.transport import rdma

from tests.unit import testcase

A = direct.ALIGN


def spy_io(case):
    """Record (kind, fd, offset, bytes asked) of every os.pwrite,
    os.preadv and os.pread while ``case`` runs.
    """
    calls = []
    for name, kind in (("pwrite", "w"), ("preadv", "r"), ("pread", "r")):
        def spy(fd, data, offset, real=getattr(os, name), kind=kind):
            n = data if isinstance(data, int) else (
                sum(len(b) for b in data) if isinstance(data, list)
                else len(data))
            calls.append((kind, fd, offset, n))
            return real(fd, data, offset)
        case.useFixture(fixtures.MonkeyPatch("os." + name, spy))
    return calls


def refuse_direct(case, name, dfd_of):
    """os.``name`` on the descriptor ``dfd_of()`` fails with EINVAL, as
    on a file system that takes no direct I/O; returns the offsets
    refused.
    """
    refused = []

    def call(fd, data, offset, real=getattr(os, name)):
        if fd == dfd_of():
            refused.append(offset)
            raise OSError(errno.EINVAL, "no direct I/O here")
        return real(fd, data, offset)
    case.useFixture(fixtures.MonkeyPatch("os." + name, call))
    return refused


class DirectTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        # /var/tmp: a disk file system (tmpfs may refuse O_DIRECT).
        self.root = tempfile.mkdtemp(prefix="dtnm-direct-", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.path = os.path.join(self.root, "f")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self.addCleanup(os.close, self.fd)
        self.dfd = direct.reopen(self.fd)
        if self.dfd is None:
            self.skipTest("%s takes no O_DIRECT here" % self.root)
        self.addCleanup(os.close, self.dfd)
        self.calls = spy_io(self)

    def filled(self, size, seed=7):
        view = buffers.aligned(size)
        view[:] = bytes((seed + i) % 251 for i in range(256)) * (size // 256)
        return view

    def content(self):
        with open(self.path, "rb") as fh:
            return fh.read()


class TestReopen(DirectTestCase):

    def test_same_file_same_mode_with_o_direct(self):
        flags = fcntl.fcntl(self.dfd, fcntl.F_GETFL)
        self.assertTrue(flags & os.O_DIRECT)
        self.assertEqual(os.O_RDWR, flags & os.O_ACCMODE)
        self.assertEqual(os.fstat(self.fd).st_ino, os.fstat(self.dfd).st_ino)

    def test_not_on_memory_file_systems(self):
        """tmpfs takes O_DIRECT (Linux 6.6 on) but gains nothing by it:
        no second descriptor there.
        """
        self.assertFalse(direct.memory_backed(self.fd))
        if not os.path.isdir("/dev/shm") or \
                os.statvfs("/dev/shm").f_bavail == 0:
            self.skipTest("no /dev/shm here")
        fd, path = tempfile.mkstemp(dir="/dev/shm")
        self.addCleanup(os.unlink, path)
        self.addCleanup(os.close, fd)
        self.assertTrue(direct.memory_backed(fd))
        self.assertIsNone(direct.reopen(fd))

    def test_refused_is_none(self):
        def refuse(*a, **kw):
            raise OSError(errno.EINVAL, "no")
        self.useFixture(fixtures.MonkeyPatch("os.open", refuse))
        self.assertIsNone(direct.reopen(self.fd))

    def test_other_errors_raise(self):
        def fail(*a, **kw):
            raise OSError(errno.EMFILE, "too many")
        self.useFixture(fixtures.MonkeyPatch("os.open", fail))
        self.assertRaises(OSError, direct.reopen, self.fd)


class TestAligned(testcase.TestCase):

    def test_rules(self):
        view = buffers.aligned(4 * A)
        self.assertTrue(direct.aligned(view, 0, 4 * A))
        self.assertTrue(direct.aligned(view, 8 * A, A))
        self.assertFalse(direct.aligned(view, 100, A))        # offset
        self.assertFalse(direct.aligned(view, 0, A + 1))      # length
        self.assertFalse(direct.aligned(view[16:], 0, A))     # buffer
        self.assertFalse(direct.aligned(view, 0, 0))
        self.assertFalse(direct.aligned(
            memoryview(bytes(A)), 0, A))                     # read-only

    def test_rdma_region_buffers_qualify(self):
        """The RDMA plane's pooled buffers (carved from one registered
        block, a page stride apart) take direct I/O like the TCP ones.
        """
        size = 3 * A + 100              # not a page multiple
        block, address = rdma.allocate_block(4 * rdma.stride_for(size))
        region = rdma.Region(block, address, 4, size)
        for index in range(4):
            view = region.allocator(index, size)
            self.assertTrue(direct.aligned(view, 8 * A, 3 * A))


class TestPwrite(DirectTestCase):

    def test_aligned_goes_direct(self):
        data = self.filled(4 * A)
        self.assertTrue(direct.pwrite(self.fd, data, 4 * A, 2 * A, self.dfd))
        self.assertEqual([("w", self.dfd, 2 * A, 4 * A)], self.calls)
        self.assertEqual(bytes(2 * A) + bytes(data), self.content())

    def test_unaligned_goes_through_the_cache(self):
        data = self.filled(4 * A)
        direct.pwrite(self.fd, data, 4 * A - 10, 0, self.dfd)   # short
        direct.pwrite(self.fd, data, A, 4 * A + 3, self.dfd)    # offset
        self.assertEqual({self.fd}, {c[1] for c in self.calls})
        got = self.content()
        self.assertEqual(bytes(data[:4 * A - 10]), got[:4 * A - 10])
        self.assertEqual(bytes(data[:A]), got[4 * A + 3:])

    def test_einval_falls_back_and_says_so(self):
        refused = refuse_direct(self, "pwrite", lambda: self.dfd)
        data = self.filled(2 * A)
        self.assertFalse(direct.pwrite(self.fd, data, 2 * A, 0, self.dfd))
        self.assertEqual([0], refused)
        self.assertEqual(bytes(data), self.content())

    def test_other_errors_raise(self):
        def pwrite(fd, data, offset):
            raise OSError(errno.ENOSPC, "full")
        self.useFixture(fixtures.MonkeyPatch("os.pwrite", pwrite))
        e = self.assertRaises(OSError, direct.pwrite, self.fd,
                              self.filled(A), A, 0, self.dfd)
        self.assertEqual(errno.ENOSPC, e.errno)

    def test_no_direct_fd(self):
        data = self.filled(A)
        self.assertTrue(direct.pwrite(self.fd, data, A, 0, None))
        self.assertEqual([("w", self.fd, 0, A)], self.calls)


class TestPreadinto(DirectTestCase):

    def test_whole_blocks_direct_and_the_short_tail(self):
        data = self.filled(4 * A)
        os.pwrite(self.fd, data[:3 * A + 100], 0)
        os.fdatasync(self.fd)
        del self.calls[:]
        out = buffers.aligned(4 * A)
        n, usable = direct.preadinto(self.fd, out, 4 * A, 0, self.dfd)
        self.assertEqual((3 * A + 100, True), (n, usable))
        self.assertEqual(bytes(data[:n]), bytes(out[:n]))
        self.assertEqual(self.dfd, self.calls[0][1])

    def test_a_length_that_is_not_aligned_reads_no_more_than_asked(self):
        data = self.filled(4 * A)
        os.pwrite(self.fd, data, 0)
        out = buffers.aligned(2 * A)
        n, _ = direct.preadinto(self.fd, out, A + 5, A, self.dfd)
        self.assertEqual(A + 5, n)
        self.assertEqual(bytes(data[A:2 * A + 5]), bytes(out[:n]))

    def test_unaligned_offset_reads_through_the_cache(self):
        data = self.filled(2 * A)
        os.pwrite(self.fd, data, 0)
        del self.calls[:]
        out = buffers.aligned(A)
        n, _ = direct.preadinto(self.fd, out, A, 10, self.dfd)
        self.assertEqual(A, n)
        self.assertEqual(bytes(data[10:10 + A]), bytes(out))
        self.assertEqual({self.fd}, {c[1] for c in self.calls})

    def test_einval_falls_back(self):
        data = self.filled(A)
        os.pwrite(self.fd, data, 0)
        refuse_direct(self, "preadv", lambda: self.dfd)
        out = buffers.aligned(A)
        self.assertEqual((A, False),
                         direct.preadinto(self.fd, out, A, 0, self.dfd))
        self.assertEqual(bytes(data), bytes(out))
