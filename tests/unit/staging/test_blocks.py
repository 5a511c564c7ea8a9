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
