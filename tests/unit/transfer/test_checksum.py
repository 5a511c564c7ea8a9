"""Tests of dtn_migrate.transfer.checksum."""

import array
import hashlib
import os
import random

import fixtures
import testtools

from dtn_migrate.transfer import checksum

from tests.unit import testcase

CHECKPOINTABLE = checksum.ResumableSha512().checkpointable


def chunked(data, rnd):
    """Split ``data`` at random points into mixed buffer types.

    bytes, bytearray, and writable and readonly memoryview slices.
    """
    pos = 0
    kind = 0
    while pos < len(data):
        n = rnd.choice((0, 1, 7, 63, 64, 127, 128, 129, 1000,
                        rnd.randrange(1, 20000)))
        piece = data[pos:pos + n]
        kind = (kind + 1) % 5
        if kind == 0:
            yield bytes(piece)
        elif kind == 1:
            yield bytearray(piece)
        elif kind == 2:
            backing = bytearray(b"\xaa" * 3 + piece + b"\xbb" * 5)
            yield memoryview(backing)[3:3 + len(piece)]
        elif kind == 3:
            backing = b"\xcc" * 2 + piece + b"\xdd"
            yield memoryview(backing)[2:2 + len(piece)]
        else:
            yield memoryview(bytearray(piece)).toreadonly()
        pos += n


class ResumableSha512Test(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.rnd = random.Random(2024)
        self.data = self.rnd.randbytes(150000)

    def hashed(self, data):
        h = checksum.ResumableSha512()
        for piece in chunked(data, self.rnd):
            h.update(piece)
        return h

    def test_empty(self):
        h = checksum.ResumableSha512()
        self.assertEqual(hashlib.sha512().digest(), h.digest())
        self.assertEqual(hashlib.sha512().hexdigest(), h.hexdigest())
        self.assertEqual(0, h.offset)
        self.assertEqual("sha512", h.name)

    def test_random_chunkings(self):
        want = hashlib.sha512(self.data).digest()
        for _ in range(20):
            h = self.hashed(self.data)
            self.assertEqual(want, h.digest())
            self.assertEqual(len(self.data), h.offset)

    def test_block_boundaries(self):
        for n in (1, 111, 112, 127, 128, 129, 255, 256, 257):
            data = self.data[:n]
            h = checksum.ResumableSha512()
            h.update(data)
            self.assertEqual(hashlib.sha512(data).digest(), h.digest(), n)

    def test_empty_updates_ignored(self):
        h = checksum.ResumableSha512()
        h.update(b"")
        h.update(bytearray())
        h.update(memoryview(b"abc")[3:])
        h.update(b"abc")
        self.assertEqual(hashlib.sha512(b"abc").digest(), h.digest())
        self.assertEqual(3, h.offset)

    def test_updates_do_not_modify_input(self):
        buf = bytearray(self.data[:5000])
        h = checksum.ResumableSha512()
        h.update(memoryview(buf))
        self.assertEqual(self.data[:5000], buf)

    def test_non_byte_buffer(self):
        # hashlib hashes every byte of any buffer; so must this.
        data = array.array("I", range(1000))
        h = checksum.ResumableSha512()
        h.update(data)
        self.assertEqual(hashlib.sha512(data).digest(), h.digest())
        self.assertEqual(4000, h.offset)

    def test_pinning_shared_with_the_staging_library(self):
        # Both libraries pin read-only buffers through PyObject_GetBuffer;
        # each must keep its own argtypes, whichever was imported last.
        from dtn_migrate.staging import nfslib
        data = bytes(range(256)) * 64
        with nfslib.pinned(data) as (addr, n):
            self.assertEqual(len(data), n)
        h = checksum.ResumableSha512()
        h.update(data)
        self.assertEqual(hashlib.sha512(data).digest(), h.digest())
        with nfslib.pinned(data) as (addr, n):
            self.assertEqual(len(data), n)

    def test_read_only_buffers_in_place(self):
        """bytes and read-only views (slices included) hash right, and
        are not copied (pinned instead).
        """
        data = random.Random(7).randbytes(300000)
        h = checksum.ResumableSha512()
        view = memoryview(data)
        h.update(data[:1000])
        h.update(view[1000:200001])
        h.update(view[200001:].toreadonly())
        self.assertEqual(hashlib.sha512(data).digest(), h.digest())
        if h.checkpointable:
            copies = []
            real = bytes
            self.patch(checksum, "bytes",
                       lambda *a: copies.append(a) or real(*a))
            h.update(data)
            self.assertEqual([], copies)

    def test_digest_does_not_disturb(self):
        h = checksum.ResumableSha512()
        h.update(self.data[:1000])
        mid = h.digest()
        self.assertEqual(mid, h.digest())
        self.assertEqual(hashlib.sha512(self.data[:1000]).digest(), mid)
        h.update(self.data[1000:])
        self.assertEqual(hashlib.sha512(self.data).digest(), h.digest())

    @testtools.skipUnless(CHECKPOINTABLE, "libcrypto lacks SHA512_*")
    def test_save_restore_continue(self):
        want = hashlib.sha512(self.data).digest()
        for cut in (0, 1, 127, 128, 129, 77777, len(self.data)):
            h = checksum.ResumableSha512()
            h.update(self.data[:cut])
            blob = h.save()
            self.assertEqual(checksum._STATE_HEADER.size
                             + checksum.STATE_SIZE, len(blob))
            r = checksum.ResumableSha512.restore(blob)
            self.assertIsNotNone(r)
            self.assertEqual(cut, r.offset)
            for piece in chunked(self.data[cut:], self.rnd):
                r.update(piece)
            self.assertEqual(want, r.digest(), cut)
            self.assertEqual(len(self.data), r.offset)

    @testtools.skipUnless(CHECKPOINTABLE, "libcrypto lacks SHA512_*")
    def test_restored_is_independent(self):
        h = checksum.ResumableSha512()
        h.update(b"prefix")
        r = checksum.ResumableSha512.restore(h.save())
        r.update(b"more")
        self.assertEqual(hashlib.sha512(b"prefix").digest(), h.digest())
        self.assertEqual(hashlib.sha512(b"prefixmore").digest(), r.digest())
        self.assertEqual(6, h.offset)

    @testtools.skipUnless(CHECKPOINTABLE, "libcrypto lacks SHA512_*")
    def test_save_after_digest(self):
        h = checksum.ResumableSha512()
        h.update(self.data[:300])
        h.digest()
        r = checksum.ResumableSha512.restore(h.save())
        r.update(self.data[300:])
        self.assertEqual(hashlib.sha512(self.data).digest(), r.digest())

    @testtools.skipUnless(CHECKPOINTABLE, "libcrypto lacks SHA512_*")
    def test_restore_refuses_bad_blobs(self):
        h = checksum.ResumableSha512()
        h.update(self.data[:1000])
        blob = h.save()
        hdr = checksum._STATE_HEADER.size
        corrupt_ctx = bytearray(blob)
        corrupt_ctx[hdr + 5] ^= 1
        corrupt_crc = bytearray(blob)
        corrupt_crc[hdr - 1] ^= 1
        bad = {
            "none": None,
            "empty": b"",
            "short": blob[:-1],
            "header only": blob[:hdr],
            "long": blob + b"\x00",
            "magic": b"XXXX" + blob[4:],
            "context": bytes(corrupt_ctx),
            "crc": bytes(corrupt_crc),
        }
        for what, b in bad.items():
            self.assertIsNone(checksum.ResumableSha512.restore(b), what)

    def test_save_without_checkpoint_support(self):
        h = checksum.ResumableSha512()
        if h.checkpointable:
            self.assertIsNotNone(h.save())
        else:
            self.assertIsNone(h.save())


class Xxh3Test(testcase.TestCase):

    def test_known_value(self):
        self.assertEqual(0x2D06800538D394C2, checksum.xxh3(b""))

    def test_sanity(self):
        a = checksum.xxh3(b"object bytes")
        self.assertEqual(a, checksum.xxh3(b"object bytes"))
        self.assertNotEqual(a, checksum.xxh3(b"object bytez"))
        self.assertTrue(0 <= a < 1 << 64)
        self.assertIsInstance(a, int)

    def test_buffer_types(self):
        data = os.urandom(5000)
        want = checksum.xxh3(data)
        self.assertEqual(want, checksum.xxh3(bytearray(data)))
        self.assertEqual(want, checksum.xxh3(memoryview(data)))
        backing = bytearray(b"\x00" + data + b"\x00")
        self.assertEqual(want, checksum.xxh3(memoryview(backing)[1:-1]))


class Sha512FileTest(testcase.TestCase):

    def test_matches_hashlib(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, "f")
        data = random.Random(1).randbytes(10000)
        with open(path, "wb") as f:
            f.write(data)
        want = hashlib.sha512(data).hexdigest()
        self.assertEqual(want, checksum.sha512_file(path))
        self.assertEqual(want, checksum.sha512_file(path, chunk=333))

    def test_empty_file(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, "f")
        open(path, "wb").close()
        self.assertEqual(hashlib.sha512().hexdigest(),
                         checksum.sha512_file(path))
