"""Object logging methods: entry encodings and bitmap regions."""

import random
import struct


from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer.objectlog import methods

from tests.unit import testcase

APPEND = ("char", "int", "binary", "varint")
EDGE = [0, 1, 7, 8, 127, 128, 255, 256, 16383, 16384, 2 ** 21, 2 ** 28 - 1,
        2 ** 28, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1]


class TestEntryFormats(testcase.TestCase):
    """The exact bytes of one entry per method (section IV-B)."""

    def test_char(self):
        self.assertEqual(b"0\n12\n4294967294\n",
                         methods.get("char").encode([0, 12, 2 ** 32 - 2]))

    def test_int(self):
        self.assertEqual(struct.pack("<II", 5, 2 ** 32 - 2),
                         methods.get("int").encode([5, 2 ** 32 - 2]))
        self.assertEqual(b"\x05\x00\x00\x00", methods.get("int").encode([5]))

    def test_binary(self):
        self.assertEqual(b"0" * 29 + b"101",
                         methods.get("binary").encode([5]))
        self.assertEqual(64, len(methods.get("binary").encode([1, 2])))

    def test_varint(self):
        self.assertEqual(b"\x05\xac\x02", methods.get("varint").encode([5,
                                                                        300]))

    def test_bitmap_regions(self):
        bit8 = methods.get("bit8")
        bit64 = methods.get("bit64")
        for n, r8, r64 in ((1, 1, 8), (8, 1, 8), (9, 2, 8), (64, 8, 8),
                           (65, 9, 16), (70000, 8750, 8752)):
            self.assertEqual(r8, bit8.region_len(n), n)
            self.assertEqual(r64, bit64.region_len(n), n)
        self.assertTrue(bit8.bitmap)
        self.assertFalse(methods.get("char").bitmap)

    def test_unknown(self):
        self.assertRaises(ValueError, methods.get, "bit32")


class TestDecode(testcase.TestCase):

    def test_round_trip(self):
        rng = random.Random(3)
        values = EDGE + [rng.randrange(2 ** 32) for _ in range(500)]
        for name in APPEND:
            method = methods.get(name)
            self.assertEqual(values, method.decode(method.encode(values)),
                             name)
            self.assertEqual([9], method.decode(method.encode([9])), name)

    def test_decode_bits(self):
        rng = random.Random(4)
        n = 1000
        values = [rng.randrange(n) for _ in range(300)] + [0, n - 1]
        expect = bitmap.Bitmap(n)
        for v in values:
            expect.add(v)
        for name in APPEND:
            method = methods.get(name)
            bits = method.decode_bits(method.encode(values), n)
            self.assertEqual(expect.bits, bits, name)

    def test_decode_bits_out_of_range(self):
        for name in APPEND:
            method = methods.get(name)
            for n in (8, 13):
                self.assertRaises(ValueError, method.decode_bits,
                                  method.encode([1, n]), n)
                self.assertRaises(ValueError, method.decode_bits,
                                  method.encode([100]), n)

    def test_malformed(self):
        bad = {
            "char": [b"12", b"1\n\n2\n", b"-1\n", b"1 \n", b"a\n", b"\n",
                     b"01\n"],
            "int": [b"\x00\x00\x00", b"\x00" * 5],
            "binary": [b"0" * 31, b"0" * 31 + b"2", b"0" * 33],
            "varint": [b"\x80", b"\x01\x81", b"\xff\xff\xff\xff\xff\x01"],
        }
        for name, cases in bad.items():
            method = methods.get(name)
            for entries in cases:
                self.assertRaises(ValueError, method.decode, entries)
                self.assertRaises(ValueError, method.decode_bits, entries,
                                  1000)

    def test_decode_accepts_memoryview(self):
        for name in APPEND:
            method = methods.get(name)
            blob = memoryview(b"xx" + method.encode([3, 4]))[2:]
            self.assertEqual([3, 4], method.decode(blob))
