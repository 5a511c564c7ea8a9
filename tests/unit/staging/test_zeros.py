"""The local copy leaves all-zero blocks unwritten in the file it sized."""

import os
import random

from dtn_migrate.staging import backend
from dtn_migrate.staging import blocks
from dtn_migrate.staging import copy
from dtn_migrate.staging import stream as staging_stream
from tests.unit.staging.test_copy import (
    FaultyBackend, FaultyWriter, KiB, MemBackend, MiB, StagingTestCase,
    chunked, options, payload, sha)

BLOCK = 64 * KiB


class SizingWriter(FaultyWriter):
    def truncate(self, size):
        self.owner.hook("truncate", self.name, size, 0)
        self.inner.truncate(size)


class SizingBackend(FaultyBackend):
    """FaultyBackend whose writers can size the file; counts the bytes
    written and where.
    """

    def __init__(self, root, **kw):
        super().__init__(root, **kw)
        self.writes = []

    def open_write(self, name, sync=False, truncate=False):
        w = super().open_write(name, sync, truncate)
        return SizingWriter(self, w.inner, name)

    def data_bytes(self):
        return sum(n for _, n in self.writes)

    def hook(self, op, name, offset, length):
        if op == "pwrite" and not name.endswith((".watermark",
                                                 ".watermark.tmp")):
            with self.lock:
                self.writes.append((offset, length))
        super().hook(op, name, offset, length)


def holey(blocks):
    """Data of ``blocks`` blocks: 'D' a random block, '0' a zero one."""
    return b"".join(payload(BLOCK, seed=i) if kind == "D" else bytes(BLOCK)
                    for i, kind in enumerate(blocks))


class TestSkipZeros(StagingTestCase):
    def stage_on(self, b, data, **kw):
        kw.setdefault("opts", options(block_size=BLOCK))
        return self.stage(data, backend=b, **kw)

    def test_zero_blocks_are_not_written(self):
        data = holey("D00D000D0")
        b = SizingBackend(self.root)
        seen = []
        result = self.stage_on(b, data, expected_sha512=sha(data),
                               observer=lambda c, f: seen.append((c, f)))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual([0, 3 * BLOCK, 7 * BLOCK],
                         sorted(o for o, _ in b.writes))
        self.assertEqual(3 * BLOCK, b.data_bytes())
        self.assertEqual((3 * BLOCK, 6 * BLOCK),
                         (result.bytes_copied, result.zero_bytes))
        # The watermark went all the way, the last (zero) block included.
        self.assertEqual((len(data), False), seen[-1])
        self.assertEqual((len(data), False), self.side("img"))
        # The file holds holes there (ext4, tmpfs, xfs all have them).
        st = os.stat(os.path.join(self.root, "img"))
        self.assertLess(st.st_blocks * 512, 5 * BLOCK)

    def test_scattered_data_is_written_alone(self):
        """Issue 37: small pieces at random offsets, each in a block of
        its own; only their pages are written (not the zeros of their
        blocks), and stay the only allocated bytes.
        """
        size, piece = 8 * MiB, 8 * KiB
        rng = random.Random(37)
        # Apart by more than a granule: each piece is a run of its own.
        offsets = sorted(rng.sample(range(0, size - piece, 128 * KiB), 12))
        data = bytearray(size)
        for i, at in enumerate(offsets):
            at += rng.randrange(4096)       # not page-aligned
            data[at:at + piece] = payload(piece, seed=i)
        data = bytes(data)
        b = SizingBackend(self.root)
        result = self.stage_on(b, data, expected_sha512=sha(data),
                               opts=options(block_size=MiB))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(sha(data), result.sha512)
        pages = 12 * (piece + 4096)
        self.assertLessEqual(b.data_bytes(), pages)
        self.assertEqual(b.data_bytes(), result.bytes_copied)
        self.assertEqual(size - b.data_bytes(), result.zero_bytes)
        st = os.stat(os.path.join(self.root, "img"))
        self.assertLessEqual(st.st_blocks * 512, pages + 64 * KiB)

    def test_scattered_block_written_again_after_a_retry(self):
        """A write of a block's second piece fails: the file opened
        again gets the whole block, its first piece too.
        """
        data = bytearray(8 * BLOCK)
        data[100:200] = payload(100, seed=1)
        data[2 * BLOCK + 10:2 * BLOCK + 20] = payload(10, seed=2)
        data = bytes(data)
        fails = [1]

        def fault(op, name, offset, length):
            if op == "pwrite" and offset == 2 * BLOCK and fails[0]:
                fails[0] -= 1
                raise backend.Unavailable("server rebooted")
        b = SizingBackend(self.root, fault=fault)
        result = self.stage_on(b, data, expected_sha512=sha(data),
                               opts=options(block_size=4 * BLOCK))
        self.assertEqual(1, result.retries)
        self.assertEqual(data, self.content("img"))
        # The failed write, the block again in the new file, the retry.
        self.assertEqual([(0, 4096), (2 * BLOCK, 4096)] * 2 +
                         [(2 * BLOCK, 4096)], b.writes)

    def test_all_zero_file(self):
        data = bytes(5 * BLOCK + 7)
        b = SizingBackend(self.root)
        result = self.stage_on(b, data, expected_sha512=sha(data))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(0, b.data_bytes())
        self.assertEqual(len(data), result.zero_bytes)
        self.assertEqual((len(data), False), self.side("img"))

    def test_zero_last_block_waits_for_the_sha512(self):
        data = holey("DD0")
        b = SizingBackend(self.root)
        self.assertRaises(backend.ChecksumMismatch, self.stage_on, b, data,
                          expected_sha512=sha(b"other"))
        committed, failed = self.side("img")
        self.assertTrue(failed)
        self.assertLess(committed, len(data))

    def test_fresh_start_over_an_older_file_reads_zeros(self):
        with open(os.path.join(self.root, "img"), "wb") as f:
            f.write(b"x" * 12 * BLOCK)
        data = holey("0D0D")
        self.stage_on(SizingBackend(self.root), data)
        self.assertEqual(data, self.content("img"))

    def test_resume_never_keeps_older_bytes_in_a_skipped_block(self):
        # An earlier attempt wrote beyond its committed watermark (or
        # staged another image under the name); the resumed copy skips
        # zero blocks there, which must still read as zeros.
        data = holey("DD00D00")
        b = SizingBackend(self.root)

        def broken():
            yield from chunked(data[:2 * BLOCK], BLOCK)
            raise IOError("cut")
        self.assertRaises(IOError, self.stage_on, b, data, source=broken())
        committed = copy.committed_bytes(b, "img", len(data))
        self.assertEqual(2 * BLOCK, committed)
        with open(os.path.join(self.root, "img"), "r+b") as f:
            f.seek(committed)
            f.write(b"y" * (len(data) - committed))
        path = os.path.join(self.root, "src")
        with open(path, "wb") as f:
            f.write(data)
        result = self.stage_on(b, data, source=blocks.file_source(path),
                               expected_sha512=sha(data))
        self.assertEqual(committed, result.start)
        self.assertEqual(data, self.content("img"))
        self.assertEqual(4 * BLOCK, result.zero_bytes)

    def test_resume_into_a_sized_file_needs_space_for_the_rest(self):
        data = holey("DDDDDDDD")
        b = SizingBackend(self.root)

        def broken():
            yield from chunked(data[:2 * BLOCK], BLOCK)
            raise IOError("cut")
        self.assertRaises(IOError, self.stage_on, b, data, source=broken())
        self.assertEqual(len(data), b.size("img"))     # sized
        path = os.path.join(self.root, "src")
        with open(path, "wb") as f:
            f.write(data)
        short = SizingBackend(self.root, free=5 * BLOCK)
        self.assertRaises(backend.NoSpace, self.stage_on, short, data,
                          source=blocks.file_source(path))
        enough = SizingBackend(self.root, free=6 * BLOCK)
        self.stage_on(enough, data, source=blocks.file_source(path))
        self.assertEqual(data, self.content("img"))

    def test_backend_without_truncate_writes_zeros(self):
        data = holey("D00D")
        b = FaultyBackend(self.root)       # its writers cannot truncate
        result = self.stage_on(b, data, opts=options(block_size=BLOCK,
                                                     side_file=False))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(len(data), b.calls["bytes_written"])
        self.assertEqual(0, result.zero_bytes)
        mem = MemBackend()
        self.stage_on(mem, data, name="m")
        self.assertEqual(data, bytes(mem.files["m"].data))

    def test_can_be_turned_off(self):
        data = holey("D00D")
        b = SizingBackend(self.root)
        self.stage_on(b, data, opts=options(block_size=BLOCK,
                                            skip_zeros=False))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(len(data), b.data_bytes())
        self.assertEqual(0, b.calls["truncate"])

    def test_sizing_is_retried(self):
        data = holey("D0D")
        fails = [1]

        def fault(op, name, offset, length):
            if op == "truncate" and fails[0]:
                fails[0] -= 1
                raise backend.Unavailable("server not responding")
        b = SizingBackend(self.root, fault=fault)
        result = self.stage_on(b, data)
        self.assertEqual(1, result.retries)
        self.assertEqual(data, self.content("img"))

    def test_a_follower_reads_zeros_while_staged(self):
        data = holey("D0000D00D0")
        mark = copy.watermark.Watermark(len(data))
        self.stage_on(SizingBackend(self.root), data, observer=mark.publish)
        with staging_stream.open_staged(
                self.backend, "img", len(data), sha(data),
                follow=mark.follow,
                options=options(block_size=BLOCK)) as s:
            self.assertEqual(data, b"".join(s))
