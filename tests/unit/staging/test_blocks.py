"""The local copy's source cut into blocks (staging.blocks): realignment
copies each byte at most once, and the zero check.
"""


from dtn_migrate.staging import blocks
from tests.unit.staging.test_copy import KiB, MiB, chunked, payload
from tests.unit import testcase

BLOCK = 64 * KiB


class TestIsZero(testcase.TestCase):
    def test_shapes(self):
        self.assertTrue(blocks.is_zero(b""))
        self.assertTrue(blocks.is_zero(bytes(3 * MiB + 5)))
        self.assertTrue(blocks.is_zero(bytearray(100)))
        self.assertTrue(blocks.is_zero(memoryview(bytes(10))))
        for where in (0, 1, MiB - 1, MiB, 2 * MiB + 4):
            data = bytearray(2 * MiB + 5)
            data[where] = 1
            self.assertFalse(blocks.is_zero(data), where)
            self.assertFalse(blocks.is_zero(memoryview(bytes(data))), where)


class TestDataRuns(testcase.TestCase):
    """What a copy into a sized file writes of a block (issue 37)."""

    def block(self, size, pieces):
        data = bytearray(size)
        for at, n in pieces:
            data[at:at + n] = b"\x01" * n
        return data

    def test_all_zero_and_all_data(self):
        self.assertEqual([], blocks.data_runs(bytes(4 * MiB), 0))
        self.assertEqual([], blocks.data_runs(b"", 0))
        dense = payload(4 * MiB)
        self.assertEqual([(0, 4 * MiB)], blocks.data_runs(dense, 8 * MiB))
        self.assertEqual([(0, 100)], blocks.data_runs(b"\x01" * 100, 0))

    def test_pieces_are_cut_out_at_pages(self):
        # Two pieces of a 4 MiB block; the first not page-aligned.
        data = self.block(4 * MiB, [(MiB + 12345, 256 * KiB),
                                    (3 * MiB, 10)])
        runs = blocks.data_runs(data, 4 * MiB)
        # 65 pages from the one the first piece starts in.
        self.assertEqual([(MiB + 12288, MiB + 12288 + 65 * 4096),
                          (3 * MiB, 3 * MiB + 4096)], runs)
        for lo, hi in runs:
            self.assertEqual(0, (4 * MiB + lo) % blocks.PAGE)
            self.assertEqual(0, (4 * MiB + hi) % blocks.PAGE)
        self.assertEqual(256 * KiB + 2 * 4096,
                         sum(hi - lo for lo, hi in runs))

    def test_zeros_shorter_than_a_granule_are_kept(self):
        data = self.block(MiB, [(0, 10), (32 * KiB, 10)])
        self.assertEqual([(0, 32 * KiB + 4096)], blocks.data_runs(data, 0))

    def test_pages_of_the_file_not_of_the_block(self):
        # A block that starts mid-page (a resumed copy's first block).
        data = self.block(MiB, [(100, 1), (200 * KiB, 1)])
        self.assertEqual([(0, 4096 - 1000), (200 * KiB - 1000,
                                             200 * KiB + 4096 - 1000)],
                         blocks.data_runs(data, 1000))
        # The last page may be short: the run ends with the block.
        data = self.block(70 * KiB + 5, [(70 * KiB + 4, 1)])
        self.assertEqual([(68 * KiB, 70 * KiB + 5)],
                         blocks.data_runs(data, 0))

    def test_pieces(self):
        data = bytes(range(256)) * 64
        self.assertEqual([(10, data)],
                         [(o, bytes(v)) for o, v in blocks.pieces(10, data)])
        self.assertEqual([(10, data[:3]), (110, data[100:200])],
                         [(o, bytes(v)) for o, v in blocks.pieces(
                             10, data, [(0, 3), (100, 200)])])


class Mutable:
    """Chunks in one bytearray that is overwritten after each one."""

    def __init__(self, data, size):
        self.data, self.size = data, size

    def __iter__(self):
        buf = bytearray(self.size)
        for i in range(0, len(self.data), self.size):
            piece = self.data[i:i + self.size]
            buf[:len(piece)] = piece
            yield memoryview(buf)[:len(piece)]
            buf[:] = b"\xff" * len(buf)


class TestRealignment(testcase.TestCase):
    def blocks(self, chunks, size, block=BLOCK):
        return list(blocks._blocks(chunks, 0, size, block, "img"))

    def test_immutable_parts_are_joined_once(self):
        data = payload(3 * BLOCK + 100)
        got = self.blocks(chunked(data, 1000), len(data))
        self.assertEqual(data, b"".join(bytes(d) for _, d in got))
        self.assertEqual([0, BLOCK, 2 * BLOCK, 3 * BLOCK],
                         [o for o, _ in got])
        for _, d in got:
            self.assertTrue(memoryview(d).readonly)

    def test_mutable_parts_are_copied_before_they_change(self):
        data = payload(3 * BLOCK + 100)
        got = self.blocks(Mutable(data, 1000), len(data))
        self.assertEqual(data, b"".join(bytes(d) for _, d in got))

    def test_mixed_parts_in_one_block(self):
        data = payload(2 * BLOCK)

        def mixed():
            yield data[:1000]                       # immutable
            yield from Mutable(data[1000:5000], 700)
            yield data[5000:]                       # immutable, long
        got = self.blocks(mixed(), len(data))
        self.assertEqual(data, b"".join(bytes(d) for _, d in got))

    def test_whole_blocks_of_bytes_are_not_copied(self):
        data = payload(2 * BLOCK)
        got = self.blocks([data], len(data))
        self.assertIs(data, got[0][1].obj)
