"""A resumed local copy starts its sha512 from the saved state of the
committed prefix and reads back only what that state does not cover.
"""

import io
import os

from dtn_migrate.staging import backend
from dtn_migrate.staging import copy
from tests.unit.staging.test_copy import (
    FaultyBackend, KiB, MiB, StagingTestCase, chunked, options, payload,
    sha)


def opts(**kw):
    kw.setdefault("block_size", 64 * KiB)
    kw.setdefault("hash_checkpoint", 256 * KiB)
    return options(**kw)


class TestResumeHash(StagingTestCase):
    def fail_at(self, data, at, name="img", **kw):
        def broken():
            yield from chunked(data[:at], 64 * KiB)
            raise IOError("cut")
        self.assertRaises(IOError, self.stage, data, broken(), name=name,
                          opts=opts(**kw))
        return copy.committed_bytes(self.backend, name, len(data))

    def saved_offset(self, name="img"):
        blob = self.backend.read_small(copy.hash_state_file(name))
        return copy.checksum.ResumableSha512.restore(blob).offset

    def counting(self):
        read = []

        def fault(op, name, offset, length):
            if op == "pread" and name == "img":
                read.append((offset, length))
        return FaultyBackend(self.root, fault=fault), read

    def test_resume_reads_only_beyond_the_saved_state(self):
        data = payload(2 * MiB)
        committed = self.fail_at(data, 1200 * KiB)
        saved = self.saved_offset()
        self.assertEqual((1024 * KiB, 1152 * KiB), (saved, committed))
        b, read = self.counting()
        result = self.stage(data, io.BytesIO(data), backend=b, opts=opts(),
                            expected_sha512=sha(data))
        self.assertEqual((committed, sha(data)),
                         (result.start, result.sha512))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(committed - saved, sum(n for _, n in read))
        self.assertTrue(all(o >= saved for o, _ in read))

    def test_damage_beyond_the_saved_state_is_found(self):
        data = payload(2 * MiB)
        committed = self.fail_at(data, 1200 * KiB)
        self.assertLess(self.saved_offset(), committed)
        with open(os.path.join(self.root, "img"), "r+b") as f:
            f.seek(committed - 1)
            f.write(b"X")
        self.assertRaises(backend.ChecksumMismatch, self.stage, data,
                          io.BytesIO(data), opts=opts(),
                          expected_sha512=sha(data))

    def test_fresh_copy_never_uses_an_older_state(self):
        first = payload(2 * MiB, seed=1)
        self.fail_at(first, 1200 * KiB)
        self.assertGreater(self.saved_offset(), 0)
        # Another image under the name, from scratch, cut before it saved
        # a state of its own: its resume must not start from the first's.
        saved = self.saved_offset()
        second = payload(2 * MiB, seed=2)
        committed = self.fail_at(second, 1900 * KiB, hash_checkpoint=MiB * 64)
        self.assertGreater(committed, saved)
        result = self.stage(second, io.BytesIO(second), opts=opts())
        self.assertEqual(sha(second), result.sha512)

    def test_state_ahead_of_the_resume_point_is_not_used(self):
        data = payload(2 * MiB)
        self.fail_at(data, 1200 * KiB)
        self.assertGreater(self.saved_offset(), 64 * KiB)
        result = self.stage(data, chunked(data, 50000, 64 * KiB),
                            offset=64 * KiB, opts=opts())
        self.assertEqual(sha(data), result.sha512)

    def test_unreadable_state_means_hashing_again(self):
        data = payload(2 * MiB)
        committed = self.fail_at(data, 1200 * KiB)
        with open(os.path.join(self.root,
                               copy.hash_state_file("img")), "wb") as f:
            f.write(b"garbage")
        b, read = self.counting()
        result = self.stage(data, io.BytesIO(data), backend=b, opts=opts())
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(committed, sum(n for _, n in read))

    def test_off_and_cleanup(self):
        data = payload(2 * MiB)
        self.fail_at(data, 1200 * KiB, hash_checkpoint=0)
        self.assertIsNone(self.backend.size(copy.hash_state_file("img")))
        copy.cleanup(self.backend, "img")
        self.fail_at(data, 1200 * KiB)
        self.assertIsNotNone(self.backend.size(copy.hash_state_file("img")))
        copy.cleanup(self.backend, "img")
        self.assertEqual([], os.listdir(self.root))
