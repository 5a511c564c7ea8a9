"""Tests of dtn_migrate.transfer.varint (unsigned LEB128)."""

import random


from dtn_migrate.transfer import varint

from tests.unit import testcase


class VarintTest(testcase.TestCase):

    def test_known_encodings(self):
        cases = [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"),
                 (128, b"\x80\x01"), (300, b"\xac\x02"),
                 (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01")]
        for value, raw in cases:
            self.assertEqual(raw, varint.encode(value))
            self.assertEqual((value, len(raw)), varint.decode(raw))

    def test_round_trip_edges(self):
        for value in (0, 1, 127, 128, 255, 256, (1 << 32) - 1, 1 << 32,
                      (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
            raw = varint.encode(value)
            self.assertEqual((value, len(raw)), varint.decode(raw))

    def test_sizes(self):
        self.assertEqual(1, len(varint.encode(127)))
        self.assertEqual(2, len(varint.encode(128)))
        self.assertEqual(10, len(varint.encode(1 << 63)))
        self.assertEqual(varint.MAX_BYTES,
                         len(varint.encode((1 << 64) - 1)))

    def test_random_round_trip(self):
        rnd = random.Random(99)
        values = [rnd.getrandbits(rnd.randrange(1, 65)) for _ in range(2000)]
        raw = varint.encode_many(values)
        self.assertEqual(values, varint.decode_many(raw))

    def test_decode_at_position(self):
        raw = b"\xaa" + varint.encode(300) + varint.encode(5)
        value, pos = varint.decode(raw, 1)
        self.assertEqual((300, 3), (value, pos))
        self.assertEqual((5, 4), varint.decode(raw, pos))

    def test_decode_ignores_following_bytes(self):
        self.assertEqual((1, 1), varint.decode(b"\x01\xff\xff"))

    def test_decode_many_empty(self):
        self.assertEqual([], varint.decode_many(b""))
        self.assertEqual(b"", varint.encode_many([]))

    def test_negative_refused(self):
        for value in (-1, -128, -(1 << 63)):
            self.assertRaises(ValueError, varint.encode, value)
        self.assertRaises(ValueError, varint.encode_many, [1, -1])

    def test_truncated(self):
        for raw in (b"", b"\x80", b"\xff\xff", b"\x80" * 9):
            self.assertRaises(ValueError, varint.decode, raw)
        self.assertRaises(ValueError, varint.decode, b"\x01", 1)
        self.assertRaises(ValueError, varint.decode_many, b"\x01\x80")

    def test_over_long(self):
        self.assertRaises(ValueError, varint.decode, b"\x80" * 10 + b"\x00")
        self.assertRaises(ValueError, varint.decode, b"\xff" * 11)
        self.assertRaises(ValueError, varint.decode_many,
                          b"\x01" + b"\xff" * 12)

    def test_longest_accepted(self):
        raw = b"\x80" * 9 + b"\x01"
        self.assertEqual((1 << 63, 10), varint.decode(raw))

    def test_accepts_any_buffer(self):
        raw = varint.encode_many([1, 200, 70000])
        self.assertEqual([1, 200, 70000],
                         varint.decode_many(memoryview(bytearray(raw))))
