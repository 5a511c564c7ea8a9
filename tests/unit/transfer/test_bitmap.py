"""Tests of dtn_migrate.transfer.bitmap."""

import random


from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import varint

from tests.unit import testcase


def make(nbits, indices):
    b = bitmap.Bitmap(nbits)
    for i in indices:
        b.add(i)
    return b


class BitmapTest(testcase.TestCase):

    def test_new_is_empty(self):
        b = bitmap.Bitmap(13)
        self.assertEqual(0, len(b))
        self.assertEqual(2, len(b.bits))
        self.assertEqual(list(range(13)), list(b.missing()))
        self.assertEqual([], list(b.present()))
        self.assertEqual(0, b.prefix())
        self.assertFalse(b.full)

    def test_zero_bits(self):
        b = bitmap.Bitmap(0)
        self.assertEqual(0, len(b))
        self.assertTrue(b.full)
        self.assertEqual(0, b.prefix())
        self.assertEqual([], list(b.missing()))
        self.assertEqual(b"", b.encode_runs())
        self.assertNotIn(0, b)

    def test_add_and_contains(self):
        b = bitmap.Bitmap(20)
        self.assertTrue(b.add(9))
        self.assertFalse(b.add(9))
        self.assertEqual(1, len(b))
        self.assertIn(9, b)
        self.assertNotIn(8, b)
        self.assertNotIn(10, b)
        self.assertEqual(0x02, b.bits[1])

    def test_bit_order(self):
        b = make(16, [0, 7, 8])
        self.assertEqual(bytearray(b"\x81\x01"), b.bits)

    def test_add_out_of_range(self):
        b = bitmap.Bitmap(10)
        for i in (-1, 10, 11, 1 << 40):
            self.assertRaises(IndexError, b.add, i)
        self.assertEqual(0, len(b))

    def test_contains_out_of_range(self):
        b = bitmap.Bitmap(10, b"\xff\x03")
        for i in (-1, -8, 10, 15, 16, 1 << 40):
            self.assertNotIn(i, b)

    def test_missing_and_present_partition(self):
        rnd = random.Random(5)
        for nbits in (1, 7, 8, 9, 63, 64, 65, 200):
            chosen = {i for i in range(nbits) if rnd.random() < 0.4}
            b = make(nbits, chosen)
            self.assertEqual(sorted(chosen), list(b.present()))
            self.assertEqual(sorted(set(range(nbits)) - chosen),
                             list(b.missing()))
            self.assertEqual(len(chosen), len(b))

    def test_missing_skips_full_bytes(self):
        b = make(20, list(range(16)) + [17])
        self.assertEqual([16, 18, 19], list(b.missing()))

    def test_prefix(self):
        self.assertEqual(5, make(20, range(5)).prefix())
        self.assertEqual(0, make(20, [1, 2, 3]).prefix())
        self.assertEqual(8, make(20, list(range(8)) + [9]).prefix())
        self.assertEqual(16, make(20, range(16)).prefix())
        self.assertEqual(20, make(20, range(20)).prefix())
        self.assertEqual(13, make(13, range(13)).prefix())
        self.assertEqual(16, make(16, range(16)).prefix())

    def test_full(self):
        b = make(13, range(12))
        self.assertFalse(b.full)
        b.add(12)
        self.assertTrue(b.full)
        self.assertEqual([], list(b.missing()))

    def test_clear(self):
        b = make(13, range(13))
        b.clear()
        self.assertEqual(0, len(b))
        self.assertEqual(bytearray(2), b.bits)
        self.assertTrue(b.add(3))

    def test_raw_constructor(self):
        b = bitmap.Bitmap(16, b"\x0f\xf0")
        self.assertEqual([0, 1, 2, 3, 12, 13, 14, 15], list(b.present()))
        self.assertEqual(8, len(b))

    def test_raw_masks_unused_trailing_bits(self):
        b = bitmap.Bitmap(10, b"\xff\xff")
        self.assertEqual(10, len(b))
        self.assertTrue(b.full)
        self.assertEqual(0x03, b.bits[1])
        self.assertEqual(list(range(10)), list(b.present()))
        self.assertEqual(10, b.prefix())
        b = bitmap.Bitmap(3, b"\xfa")
        self.assertEqual([1], list(b.present()))
        self.assertEqual(1, len(b))

    def test_raw_is_copied(self):
        raw = bytearray(2)
        b = bitmap.Bitmap(16, raw)
        b.add(0)
        self.assertEqual(bytearray(2), raw)

    def test_raw_wrong_length(self):
        self.assertRaises(ValueError, bitmap.Bitmap, 16, b"\x00")
        self.assertRaises(ValueError, bitmap.Bitmap, 16, b"\x00" * 3)
        self.assertRaises(ValueError, bitmap.Bitmap, 0, b"\x00")

    def test_runs(self):
        self.assertEqual([10], bitmap.Bitmap(10).runs())
        self.assertEqual([0, 10], make(10, range(10)).runs())
        self.assertEqual([2, 3, 5], make(10, [2, 3, 4]).runs())
        self.assertEqual([0, 1, 1, 1, 1], make(4, [0, 2]).runs())


class RunsEncodingTest(testcase.TestCase):

    def assertRoundTrip(self, b):
        blob = b.encode_runs()
        got = bitmap.Bitmap.decode_runs(blob, b.nbits)
        self.assertEqual(b.nbits, got.nbits)
        self.assertEqual(b.bits, got.bits)
        self.assertEqual(len(b), len(got))
        return blob

    def test_empty_encodes_to_nothing(self):
        self.assertEqual(b"", self.assertRoundTrip(bitmap.Bitmap(100)))

    def test_full(self):
        for nbits in (1, 8, 13, 1000):
            blob = self.assertRoundTrip(make(nbits, range(nbits)))
            self.assertEqual([0, nbits], varint.decode_many(blob))

    def test_alternating(self):
        for nbits in (2, 9, 64, 333):
            self.assertRoundTrip(make(nbits, range(0, nbits, 2)))
            self.assertRoundTrip(make(nbits, range(1, nbits, 2)))

    def test_random(self):
        rnd = random.Random(1234)
        for _ in range(300):
            nbits = rnd.randrange(1, 300)
            density = rnd.random()
            self.assertRoundTrip(
                make(nbits, [i for i in range(nbits)
                             if rnd.random() < density]))

    def test_not_multiple_of_eight(self):
        for nbits in (1, 3, 7, 9, 15, 17, 1001):
            self.assertRoundTrip(make(nbits, [nbits - 1]))
            self.assertRoundTrip(make(nbits, [0]))

    def test_empty_blob_is_empty_bitmap(self):
        b = bitmap.Bitmap.decode_runs(b"", 50)
        self.assertEqual(50, b.nbits)
        self.assertEqual(0, len(b))

    def test_all_clear_runs(self):
        b = bitmap.Bitmap.decode_runs(varint.encode_many([50]), 50)
        self.assertEqual(0, len(b))

    def test_runs_must_sum_to_nbits(self):
        for runs, nbits in (([2, 3], 6), ([2, 3], 4), ([0, 10], 11),
                            ([1 << 40, 1], 10), ([0], 1)):
            self.assertRaises(errors.BoundsError,
                              bitmap.Bitmap.decode_runs,
                              varint.encode_many(runs), nbits)

    def test_malformed_varint(self):
        for blob in (b"\x80", b"\x05\xff", b"\x80" * 11 + b"\x01",
                     b"\xff" * 20):
            exc = self.assertRaises(errors.ProtocolError,
                                    bitmap.Bitmap.decode_runs, blob, 5)
            self.assertEqual(errors.Code.PROTOCOL, exc.code)
