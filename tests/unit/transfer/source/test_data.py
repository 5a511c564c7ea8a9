"""What the source puts on the wire: zero extents instead of zeros,
zstd-compressed objects, and one read of every byte (the sha512 is fed
from the objects read for sending).  Source and sink in one process.
"""

import hashlib
import os
from unittest import mock

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import direct
from dtn_migrate.transfer.source import data as sourcedata
from dtn_migrate.transfer.source import hash as sourcehash
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.transfer import test_engine

KiB = 1 << 10
MiB = 1 << 20
OBJ = 256 * KiB


def sparse_file(path, size, data):
    """``size`` bytes, a hole but for ``data``: {offset: bytes}."""
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, blob in data.items():
            f.seek(offset)
            f.write(blob)


class SpyMixin:
    def spy(self, cls, name):
        """Record the arguments of every call of ``cls.name``."""
        calls = []
        real = getattr(cls, name)

        def wrapper(*args, **kw):
            calls.append(args[1:])
            return real(*args, **kw)
        patcher = mock.patch.object(cls, name, wrapper)
        patcher.start()
        self.addCleanup(patcher.stop)
        return calls


class TestZeroExtents(test_engine.EngineTestCase, SpyMixin):
    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.src, "disk.img")
        # 32 objects: a hole, 1 MiB of data (objects 12-15), a hole,
        # 512 KiB of written zeros (objects 24-25: data to SEEK_DATA,
        # zeros when read), a hole.
        self.data = os.urandom(1 * MiB)
        sparse_file(self.path, 8 * MiB,
                    {3 * MiB: self.data, 6 * MiB: bytes(512 * KiB)})

    def test_sparse_file_sends_only_its_data(self):
        runs = self.spy(sourcedata.DataMixin, "_send_zeros")
        server = self.start_sink()
        t = self.transfer(server.port, ["disk.img"])
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("disk.img")
        self.assertEqual(28, status["objects_zero"])
        self.assertEqual(1 * MiB, status["bytes_sent"])
        # Frames only beyond the data.
        self.assertLess(status["bytes_sent_wire"], 1 * MiB + 16 * KiB)
        # Holes go as runs: objects 0-11, 16-23 and 26-31 in one
        # ZERO_BLOCKS each (several if the window cut a run); the
        # written zeros one by one.
        counts = sorted(c for _, _, _, c in runs)
        self.assertEqual(28, sum(counts))
        self.assertLessEqual(len(runs), 8, runs)
        self.assertGreater(counts[-1], 1)
        # The sha512 the source computed covers the zeros too.
        with open(self.path, "rb") as f:
            self.assertEqual(hashlib.sha512(f.read()).hexdigest(),
                             status["files"][0]["sha512"])

    def test_data_pieces_inside_objects(self):
        """Objects holding a little data and a hole go zstd-encoded
        without compression: the link carries about the data.
        """
        path = os.path.join(self.src, "pieces.img")
        sparse_file(path, 8 * MiB, {k * MiB + 4096 * k: os.urandom(20000)
                                    for k in range(8)})
        server = self.start_sink()
        t = self.transfer(server.port, ["pieces.img"])
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("pieces.img")
        self.assertEqual(8, status["objects_sparse"])
        self.assertEqual(0, status["objects_compressed"])
        self.assertLess(status["bytes_sent_wire"],
                        1.05 * 8 * 20000 + 16 * KiB)

    def test_off_sends_every_byte(self):
        server = self.start_sink()
        t = self.transfer(server.port, ["disk.img"],
                          cfg=self.cfg(zero_extents=False))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("disk.img")
        self.assertEqual(0, status["objects_zero"])
        self.assertEqual(8 * MiB, status["bytes_sent"])

    def test_sink_without_the_capability(self):
        """A sink that does not accept ZERO_EXTENTS gets bytes."""
        server = self.start_sink()
        server.accept_caps = P.Caps.NONE
        t = self.transfer(server.port, ["disk.img"])
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("disk.img")
        self.assertEqual(0, status["objects_zero"])
        self.assertEqual(8 * MiB, status["bytes_sent"])


class TestCompression(test_engine.EngineTestCase):
    def setUp(self):
        super().setUp()
        text = b"".join(b"line %d of a rather compressible file\n" % i
                        for i in range(150000))
        with open(os.path.join(self.src, "text"), "wb") as f:
            f.write(text[:4 * MiB])
        with open(os.path.join(self.src, "random"), "wb") as f:
            f.write(os.urandom(2 * MiB))

    def run_with(self, mode, names):
        server = self.start_sink()
        t = self.transfer(server.port, names, cfg=self.cfg(compression=mode))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        for name in names:
            self.assertSameFile(name)
        return status

    def test_on_compresses_what_shrinks(self):
        status = self.run_with("on", ["text", "random"])
        # Every object of "text", none of "random".
        self.assertEqual(16, status["objects_compressed"])
        self.assertEqual(6 * MiB, status["bytes_sent"])
        self.assertLess(status["bytes_sent_wire"], 2 * MiB + 1 * MiB)

    def test_off_sends_bytes(self):
        status = self.run_with("off", ["text"])
        self.assertEqual(0, status["objects_compressed"])
        self.assertGreaterEqual(status["bytes_sent_wire"], 4 * MiB)

    def test_auto_compresses_behind_a_slow_link(self):
        # 8 MiB/s: the senders are the bottleneck.
        server = self.start_sink()
        t = self.transfer(server.port, ["text"],
                          cfg=self.cfg(compression="auto",
                                       rate_limit=8 * MiB))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("text")
        self.assertGreater(status["objects_compressed"], 0)
        self.assertLess(status["bytes_sent_wire"], 4 * MiB)


class TestDirectReads(test_engine.EngineTestCase):
    """Whole objects are read with O_DIRECT (one read per object, hashed
    from memory); the short last one too, up to the end of the file.
    """

    def spy(self):
        calls = []
        real = direct.preadinto

        def read_direct(fd, view, length, offset, dfd):
            calls.append((offset, length, dfd))
            return real(fd, view, length, offset, dfd)
        patcher = mock.patch.object(direct, "preadinto", read_direct)
        patcher.start()
        self.addCleanup(patcher.stop)
        return calls

    def test_objects_read_direct(self):
        test_engine.write_file(os.path.join(self.src, "f"), 5 * MiB + 777, 5)
        calls = self.spy()
        server = self.start_sink()
        t = self.transfer(server.port, ["f"])
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("f")
        self.assertEqual(test_engine.sha512(os.path.join(self.src, "f")),
                         status["files"][0]["sha512"])
        self.assertEqual(list(range(0, 5 * MiB + 777, self.cfg().object_size)),
                         sorted(c[0] for c in calls))
        self.assertNotIn(None, [c[2] for c in calls])

    def test_off_reads_through_the_page_cache(self):
        test_engine.write_file(os.path.join(self.src, "f"), 3 * MiB, 6)
        calls = self.spy()
        server = self.start_sink()
        t = self.transfer(server.port, ["f"],
                          cfg=self.cfg(direct_io=False))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("f")
        self.assertEqual([], calls)


class TestHashOnce(test_engine.EngineTestCase, SpyMixin):
    def test_every_byte_read_once(self):
        """The source's sha512 comes from the reads for sending: no
        second pass over the file.
        """
        test_engine.write_file(os.path.join(self.src, "f"),
                               5 * MiB + 777, 3)
        reads = []
        real = sourcedata.DataMixin._read
        real_direct = direct.preadinto

        def read(fd, offset, length, *rest):
            reads.append(length)
            return real(fd, offset, length, *rest)

        def read_direct(fd, view, length, offset, dfd):
            got = real_direct(fd, view, length, offset, dfd)
            reads.append(got[0])
            return got
        for patcher in (mock.patch.object(sourcedata.DataMixin, "_read",
                                          staticmethod(read)),
                        mock.patch.object(direct, "preadinto",
                                          read_direct)):
            patcher.start()
            self.addCleanup(patcher.stop)
        server = self.start_sink()
        t = self.transfer(server.port, ["f"], cfg=self.cfg(io_threads=4))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("f")
        self.assertEqual(test_engine.sha512(os.path.join(self.src, "f")),
                         status["files"][0]["sha512"])
        self.assertEqual(5 * MiB + 777, sum(reads))
        self.assertEqual(0, status["bytes_hashed_again"])
        self.assertEqual([], os.listdir(t.hash_dir))

    def test_checkpoint_of_the_same_content_is_resumed(self):
        path = os.path.join(self.src, "f")
        test_engine.write_file(path, 3 * MiB, 4)
        server = self.start_sink()
        t = self.transfer(server.port, ["f"])
        # A checkpoint from an earlier run, 1 MiB in.
        h = checksum.ResumableSha512()
        with open(path, "rb") as f:
            h.update(bytearray(f.read(1 * MiB)))
        with open(os.path.join(t.hash_dir, "0.sha"), "wb") as f:
            f.write(h.save())
        fed = self.spy(sourcehash.OrderedSha512, "_update")
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(test_engine.sha512(path),
                         status["files"][0]["sha512"])
        # Only what the checkpoint did not cover was hashed.
        self.assertEqual(2 * MiB, sum(len(v) for v, in fed))
