import mmap
import os
import tempfile
from unittest import mock


from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import extents

from tests.unit import testcase

MiB = 1 << 20


class TestNextData(testcase.TestCase):
    def setUp(self):
        super().setUp()
        fd, self.path = tempfile.mkstemp()
        self.addCleanup(os.unlink, self.path)
        os.ftruncate(fd, 8 * MiB)
        os.pwrite(fd, b"x" * MiB, 3 * MiB)
        os.close(fd)
        self.fd = os.open(self.path, os.O_RDONLY)
        self.addCleanup(os.close, self.fd)

    def test_hole_then_data(self):
        self.assertEqual(3 * MiB, extents.next_data(self.fd, 0, 8 * MiB))
        self.assertEqual(3 * MiB, extents.next_data(self.fd, 3 * MiB,
                                                    8 * MiB))

    def test_bounded_by_end(self):
        self.assertEqual(2 * MiB, extents.next_data(self.fd, 0, 2 * MiB))

    def test_trailing_hole(self):
        self.assertEqual(8 * MiB, extents.next_data(self.fd, 4 * MiB,
                                                    8 * MiB))

    def test_unknown_means_data(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        self.assertEqual(5, extents.next_data(r, 5, 100))


class TestIsZero(testcase.TestCase):
    def test_zero_and_not(self):
        buf = memoryview(mmap.mmap(-1, MiB))
        self.assertTrue(extents.is_zero(buf))
        self.assertTrue(extents.is_zero(buf[:4096]))
        self.assertTrue(extents.is_zero(buf[:0]))
        buf[MiB - 1] = 1
        self.assertFalse(extents.is_zero(buf))
        self.assertTrue(extents.is_zero(buf[:MiB - 1]))

    def test_digest_rules_out(self):
        buf = memoryview(mmap.mmap(-1, 4096))
        self.assertTrue(extents.is_zero(buf, checksum.xxh3(bytes(4096))))
        # A digest that is not the zeros' says "not zero" without a look.
        self.assertFalse(extents.is_zero(buf, 12345))

    def test_digest_collision_is_confirmed(self):
        buf = memoryview(mmap.mmap(-1, 4096))
        buf[7] = 9
        self.assertFalse(extents.is_zero(buf, checksum.xxh3(bytes(4096))))

    def test_read_only(self):
        self.assertTrue(extents.is_zero(bytes(100)))
        self.assertFalse(extents.is_zero(b"\0\0\1"))


class TestHasZeroRuns(testcase.TestCase):
    def setUp(self):
        super().setUp()
        fd, self.path = tempfile.mkstemp()
        self.addCleanup(os.unlink, self.path)
        os.close(fd)

    def check(self, data, sparse_at=None):
        with open(self.path, "wb") as f:
            f.truncate(len(data))
            if sparse_at is None:
                f.write(data)
            else:
                f.seek(sparse_at)
                f.write(data[sparse_at:sparse_at + 4096])
        fd = os.open(self.path, os.O_RDONLY)
        try:
            buf = memoryview(mmap.mmap(-1, len(data)))
            os.preadv(fd, [buf], 0)
            return extents.has_zero_runs(fd, 0, len(data), buf)
        finally:
            os.close(fd)

    def test_dense_data(self):
        self.assertFalse(self.check(os.urandom(MiB)))

    def test_hole_inside(self):
        self.assertTrue(self.check(os.urandom(MiB), sparse_at=8192))

    def test_written_zero_runs(self):
        data = bytearray(os.urandom(MiB))
        data[:MiB // 2] = bytes(MiB // 2)
        self.assertTrue(self.check(bytes(data)))

    def test_few_zero_pages(self):
        data = bytearray(os.urandom(MiB))
        data[:MiB // 16] = bytes(MiB // 16)
        self.assertFalse(self.check(bytes(data)))


class TestHoleCursor(testcase.TestCase):
    def setUp(self):
        super().setUp()
        fd, self.path = tempfile.mkstemp()
        self.addCleanup(os.unlink, self.path)
        os.pwrite(fd, os.urandom(MiB), 0)
        os.ftruncate(fd, 3 * MiB)          # data, then a hole to the end
        os.close(fd)
        self.fd = os.open(self.path, os.O_RDONLY)
        self.addCleanup(os.close, self.fd)
        real = os.lseek
        self.holes_asked = 0

        def lseek(fd, pos, how):
            if how == os.SEEK_HOLE:
                self.holes_asked += 1
            return real(fd, pos, how)
        patcher = mock.patch.object(extents.os, "lseek", lseek)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_dense_objects_ask_once(self):
        # A dense file asked once per object was quadratic on tmpfs,
        # whose SEEK_HOLE walks to the next hole (the file's end).
        cursor = extents.HoleCursor(self.fd)
        buf = memoryview(mmap.mmap(-1, 64 * 1024))
        for k in range(16):
            offset = k * 64 * 1024
            os.preadv(self.fd, [buf], offset)
            self.assertFalse(extents.has_zero_runs(
                self.fd, offset, len(buf), buf, holes=cursor))
        self.assertEqual(1, self.holes_asked)

    def test_hole_found_and_asked_again_outside(self):
        cursor = extents.HoleCursor(self.fd)
        hole = cursor.next_hole(0)
        self.assertGreaterEqual(hole, MiB)
        self.assertEqual(hole, cursor.next_hole(MiB // 2))
        self.assertEqual(1, self.holes_asked)
        self.assertEqual(2 * MiB, cursor.next_hole(2 * MiB))
        self.assertEqual(2, self.holes_asked)
