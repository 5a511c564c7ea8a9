"""libnfs reads land straight in the bytes object handed out."""

import ctypes

import os
import shutil
import tempfile


from dtn_migrate.staging import copycommon
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import localfs
from dtn_migrate.staging import nfslib
from dtn_migrate.staging import stream as staging_stream

from tests.unit import testcase


class FakeReader:
    """A LibnfsReader whose readinto copies from ``data`` the way
    nfs_pread fills the pinned buffer.
    """

    def __new__(cls, data):
        r = object.__new__(libnfs.LibnfsReader)
        r.buffers = []

        def readinto(buf, offset):
            r.buffers.append(buf)
            with nfslib.pinned(buf) as (addr, length):
                piece = data[offset:offset + length]
                ctypes.memmove(addr, piece, len(piece))
                return len(piece)
        r.readinto = readinto
        return r


class TestUnfilledBytes(testcase.TestCase):
    def test_new_object_of_the_size(self):
        a, b = nfslib.unfilled_bytes(100), nfslib.unfilled_bytes(100)
        self.assertIsInstance(a, bytes)
        self.assertEqual((100, 100), (len(a), len(b)))
        self.assertIsNot(a, b)
        self.assertRaises(ValueError, nfslib.unfilled_bytes, 1)
        self.assertRaises(ValueError, nfslib.unfilled_bytes, 0)


class TestPread(testcase.TestCase):
    data = bytes(range(256)) * 64

    def test_full_read_is_not_copied(self):
        r = FakeReader(self.data)
        got = r.pread(4096, 100)
        self.assertIsInstance(got, bytes)
        self.assertEqual(self.data[100:4196], got)
        self.assertIs(r.buffers[-1], got)       # the buffer read into
        # Hashes of bytes filled in place are computed from the content.
        self.assertEqual(hash(self.data[100:4196]), hash(got))

    def test_short_read_at_the_end(self):
        r = FakeReader(self.data)
        got = r.pread(4096, len(self.data) - 10)
        self.assertEqual(self.data[-10:], got)
        self.assertIsInstance(got, bytes)
        self.assertEqual(b"", r.pread(10, len(self.data)))

    def test_tiny_reads(self):
        r = FakeReader(self.data)
        self.assertEqual(self.data[7:8], r.pread(1, 7))
        self.assertEqual(b"", r.pread(0, 7))
        self.assertEqual(b"", r.pread(1, len(self.data)))


class TestStreamRead(testcase.TestCase):
    def test_whole_blocks_are_handed_out_as_read(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root, True)
        data = os.urandom(3 * 65536 + 10)
        with open(os.path.join(root, "img"), "wb") as f:
            f.write(data)
        be = localfs.LocalBackend(root)
        read = []
        real = localfs.FileReader.pread

        def pread(reader, size, offset):
            got = real(reader, size, offset)
            read.append(got)
            return got
        self.patch(localfs.FileReader, "pread", pread)
        opts = copycommon.CopyOptions(block_size=65536, readers=1)
        with staging_stream.open_staged(
                be, "img", len(data), options=opts) as s:
            first = s.read(65536)
            self.assertIs(read[0], first)           # not copied
            rest = [s.read(1000), s.read(1 << 20), s.read(1 << 20),
                    s.read(1 << 20), s.read(1 << 20)]
        self.assertEqual(data, first + b"".join(rest))
        self.assertEqual(b"", rest[-1])
