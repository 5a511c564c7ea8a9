"""The copy engine's local copy (stage), and the fakes and helpers the
tests of the remote copy (test_stream.py) and of what both copies share
(test_copycommon.py) use too.

Most tests run on a LocalBackend in a temporary directory.  Faults come
from two fakes: FaultyBackend wraps LocalBackend and lets a test raise
from any call, and MemBackend keeps files in memory with NFS semantics
(writes are lost on a server crash until committed).
"""

import collections
import hashlib
import io
import os
import random
import shutil
import tempfile
import threading
import time
from unittest import mock

import fixtures

from dtn_migrate.staging import backend
from dtn_migrate.staging import blocks
from dtn_migrate.staging import copy
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import localfs
from dtn_migrate.staging import stream as staging_stream
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import config
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import direct
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from tests.unit import utils as test_utils
from tests.unit import testcase

KiB = 1 << 10
MiB = 1 << 20
KEY = b"k" * 32


def payload(size, seed=1):
    return random.Random(seed).randbytes(size)


def sha(data):
    return hashlib.sha512(data).hexdigest()


def chunked(data, size, start=0):
    for i in range(start, len(data), size):
        yield data[i:i + size]


def slow(chunks, delay):
    for chunk in chunks:
        time.sleep(delay)
        yield chunk


def options(**kw):
    kw.setdefault("block_size", 64 * KiB)
    kw.setdefault("queue_depth", 4)
    kw.setdefault("commit_interval", 256 * KiB)
    kw.setdefault("free_margin", 0)
    kw.setdefault("retry_initial", 0.001)
    kw.setdefault("retry_max", 0.01)
    kw.setdefault("commit_idle", 0.05)
    kw.setdefault("poll_initial", 0.001)
    kw.setdefault("poll_max", 0.02)
    kw.setdefault("progress_interval", 0.01)
    return copycommon.CopyOptions(**kw)


def copy_threads():
    return [t.name for t in threading.enumerate()
            if t.name.startswith(("stage-", "unstage-"))]


# Fakes.

class FaultyWriter(backend.Writer):
    def __init__(self, owner, inner, name):
        self.owner, self.inner, self.name = owner, inner, name

    def pwrite(self, data, offset):
        self.owner.hook("pwrite", self.name, offset, len(data))
        self.inner.pwrite(data, offset)
        self.owner.count("bytes_written", len(data))

    def commit(self):
        self.owner.hook("commit", self.name, 0, 0)
        self.inner.commit()

    def close(self):
        self.inner.close()


class FaultyReader(backend.Reader):
    def __init__(self, owner, inner, name):
        self.owner, self.inner, self.name = owner, inner, name

    def pread(self, size, offset):
        self.owner.hook("pread", self.name, offset, size)
        return self.inner.pread(size, offset)

    def close(self):
        self.inner.close()


class FaultyBackend(localfs.LocalBackend):
    """LocalBackend whose calls go through ``fault(op, name, offset,
    length)``, which may raise; counts every call.
    """

    def __init__(self, root, fault=None, free=None):
        super().__init__(root)
        self.fault = fault
        self.free = free
        self.calls = collections.Counter()
        self.lock = threading.Lock()

    def count(self, op, n=1):
        with self.lock:
            self.calls[op] += n

    def hook(self, op, name, offset, length):
        self.count(op)
        self.count((op, name))
        if self.fault is not None:
            self.fault(op, name, offset, length)

    def open_write(self, name, sync=False, truncate=False):
        self.hook("open_write", name, 0, 0)
        if sync:
            self.count(("sync", name))
        return FaultyWriter(self, super().open_write(name, sync, truncate),
                            name)

    def open_read(self, name):
        self.hook("open_read", name, 0, 0)
        return FaultyReader(self, super().open_read(name), name)

    def free_bytes(self):
        return super().free_bytes() if self.free is None else self.free


class MemFile:
    def __init__(self):
        self.data = bytearray()      # what readers see (server cache)
        self.durable = bytearray()   # what survives a crash


class MemWriter(backend.Writer):
    def __init__(self, owner, name):
        self.owner, self.name, self.epoch = owner, name, owner.epoch

    def _check(self, op, offset, length):
        self.owner.hook(op, self.name, offset, length)
        if self.epoch != self.owner.epoch:
            raise backend.StaleHandle("stale handle for %s" % self.name)

    def pwrite(self, data, offset):
        with self.owner.lock:
            self._check("pwrite", offset, len(data))
            f = self.owner.files[self.name]
            if len(f.data) < offset:
                f.data.extend(bytes(offset - len(f.data)))
            f.data[offset:offset + len(data)] = data

    def commit(self):
        with self.owner.lock:
            self._check("commit", 0, 0)
            f = self.owner.files[self.name]
            f.durable = bytearray(f.data)

    def close(self):
        pass


class MemReader(backend.Reader):
    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def pread(self, size, offset):
        with self.owner.lock:
            self.owner.hook("pread", self.name, offset, size)
            return bytes(self.owner.files[self.name].data[
                offset:offset + size])

    def close(self):
        pass


class MemBackend(backend.Backend):
    """An NFS-like export in memory.  ``crash()`` loses every write not
    committed and makes open handles stale.
    """

    description = "mem:/export"

    def __init__(self, free=1 << 40, fault=None):
        self.files = {}
        self.free = free
        self.fault = fault
        self.epoch = 0
        self.lock = threading.RLock()
        self.calls = collections.Counter()

    def hook(self, op, name, offset, length):
        self.calls[op] += 1
        if self.fault is not None:
            self.fault(op, name, offset, length)

    def crash(self):
        with self.lock:
            self.epoch += 1
            for f in self.files.values():
                f.data = bytearray(f.durable)

    def open_write(self, name, sync=False, truncate=False):
        with self.lock:
            self.hook("open_write", name, 0, 0)
            f = self.files.setdefault(name, MemFile())
            if truncate:
                f.data = bytearray()
                f.durable = bytearray()
            return MemWriter(self, name)

    def open_read(self, name):
        with self.lock:
            if name not in self.files:
                raise backend.StagingNotFound(name)
            return MemReader(self, name)

    def size(self, name):
        with self.lock:
            f = self.files.get(name)
            return None if f is None else len(f.data)

    def remove(self, name):
        with self.lock:
            self.files.pop(name, None)

    def rename(self, old, new):
        with self.lock:
            self.files[new] = self.files.pop(old)

    def rmdir(self, name):
        with self.lock:
            if any(f.startswith(name + "/") for f in self.files):
                raise backend.NotEmpty(name)

    def free_bytes(self):
        return self.free


class StagingTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-copy-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.backend = localfs.LocalBackend(self.root)

    def tearDown(self):
        super().tearDown()
        self.assertEqual([], copy_threads())

    def content(self, name):
        with open(os.path.join(self.root, name), "rb") as f:
            return f.read()

    def side(self, name):
        return dataset.read_watermark_file(
            os.path.join(self.root, name + ".watermark"))

    def put(self, data, name="img"):
        self.stage(data, name=name)

    def stage(self, data, source=None, name="img", backend=None, **kw):
        opts = kw.pop("opts", None) or options()
        if source is None:
            source = chunked(data, 100 * KiB)
        return copy.stage(backend or self.backend, name, source, len(data),
                          options=opts, **kw)


# Local copy.

class TestStageShapes(StagingTestCase):
    def test_chunks_and_blocks_of_every_size(self):
        block = 64 * KiB
        for size in (1, block - 1, block, 3 * block + 1234, 700 * KiB):
            data = payload(size, size)
            for chunk in (1000, block - 1, block, block + 1, 5 * block):
                for writers in (1, 2, 3):
                    name = "img-%d-%d-%d" % (size, chunk, writers)
                    result = self.stage(
                        data, chunked(data, chunk), name=name,
                        opts=options(block_size=block, writers=writers))
                    self.assertEqual(data, self.content(name), name)
                    self.assertEqual(sha(data), result.sha512)
                    self.assertEqual((size, False), self.side(name))
                    self.assertEqual(size, result.bytes_copied)
                    self.assertEqual(0, result.start)

    def test_block_larger_than_file_and_unaligned_commit_interval(self):
        data = payload(300 * KiB + 3)
        result = self.stage(data, opts=options(block_size=1 * MiB,
                                               commit_interval=1))
        self.assertEqual(data, self.content("img"))
        self.assertEqual(sha(data), result.sha512)

    def test_mutable_chunks_are_copied(self):
        # A producer reusing its buffer must not corrupt queued blocks.
        data = payload(1 * MiB)

        def reusing():
            buf = bytearray(64 * KiB)
            for chunk in chunked(data, 64 * KiB):
                buf[:] = chunk
                yield buf
        result = self.stage(data, reusing())
        self.assertEqual(data, self.content("img"))
        self.assertEqual(sha(data), result.sha512)

    def test_memoryview_and_empty_chunks(self):
        data = payload(200 * KiB)
        chunks = [b"", memoryview(data[:1000]), b"", data[1000:], b""]
        self.stage(data, iter(chunks))
        self.assertEqual(data, self.content("img"))

    def test_zero_length(self):
        result = self.stage(b"", iter([]))
        self.assertEqual(b"", self.content("img"))
        self.assertEqual(sha(b""), result.sha512)
        self.assertEqual((0, False), self.side("img"))
        # Again: still fine, nothing to do.
        self.assertEqual(sha(b""), self.stage(b"", iter([b""])).sha512)

    def test_zero_length_with_data_is_refused(self):
        self.assertRaises(backend.ShortData, self.stage, b"", iter([b"x"]))

    def test_from_path(self):
        data = payload(1 * MiB + 17)
        path = os.path.join(self.root, "source.raw")
        with open(path, "wb") as f:
            f.write(data)
        result = self.stage(data, path)
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(data, self.content("img"))

    def test_from_file_objects(self):
        data = payload(500 * KiB)
        self.stage(data, io.BytesIO(data), name="seekable")
        self.assertEqual(data, self.content("seekable"))

        class Pipe:
            def __init__(self):
                self.f = io.BytesIO(data)

            def read(self, n):
                return self.f.read(min(n, 1500))
        self.stage(data, Pipe(), name="pipe")
        self.assertEqual(data, self.content("pipe"))

    def test_fresh_start_truncates_a_longer_file(self):
        with open(os.path.join(self.root, "img"), "wb") as f:
            f.write(b"x" * 3 * MiB)
        data = payload(1 * MiB)
        self.stage(data)
        self.assertEqual(data, self.content("img"))

    def test_sync_writes(self):
        b = FaultyBackend(self.root)
        data = payload(300 * KiB)
        self.stage(data, backend=b, opts=options(sync=True, writers=2))
        self.assertEqual(2, b.calls[("sync", "img")])
        self.assertEqual(data, self.content("img"))

    def test_bad_arguments(self):
        self.assertRaises(ValueError, self.stage, b"", name="../x")
        self.assertRaises(ValueError, copy.stage, self.backend, "a", [], -1)
        self.assertRaises(ValueError, copycommon.CopyOptions, block_size=0)
        self.assertRaises(ValueError, copycommon.CopyOptions, writers=0)


class TestStageChecks(StagingTestCase):
    def test_short_iterator(self):
        data = payload(1 * MiB)
        exc = self.assertRaises(backend.ShortData, self.stage, data,
                                chunked(data[:-10], 50000))
        self.assertIn("ended after %d of %d" % (len(data) - 10, len(data)),
                      str(exc))
        committed, failed = self.side("img")
        self.assertTrue(failed)
        self.assertLess(committed, len(data))
        self.assertEqual(committed, exc.committed)
        self.assertEqual(data[:committed], self.content("img")[:committed])

    def test_long_iterator_in_one_chunk(self):
        data = payload(1 * MiB)
        exc = self.assertRaises(backend.ShortData, self.stage, data,
                                iter([data + b"extra"]))
        self.assertIn("more than the declared", str(exc))
        self.assertTrue(self.side("img")[1])

    def test_long_iterator_after_the_last_byte(self):
        # The last block is held back until the source is exhausted, so a
        # source longer than declared never gets a complete watermark.
        data = payload(1 * MiB)
        chunks = list(chunked(data, 64 * KiB)) + [b"", b"x"]
        self.assertRaises(backend.ShortData, self.stage, data, iter(chunks))
        committed, failed = self.side("img")
        self.assertTrue(failed)
        self.assertLess(committed, len(data))
        self.assertNotEqual(len(data), copy.committed_bytes(
            self.backend, "img", len(data)))

    def test_expected_sha512(self):
        data = payload(300 * KiB)
        result = self.stage(data, expected_sha512=sha(data).upper())
        self.assertEqual(sha(data), result.sha512)

    def test_sha512_mismatch(self):
        data = payload(1 * MiB)
        exc = self.assertRaises(backend.ChecksumMismatch, self.stage, data,
                                expected_sha512=sha(b"other"))
        self.assertIn(sha(data), str(exc))
        committed, failed = self.side("img")
        self.assertTrue(failed)
        self.assertLess(committed, len(data))

    def test_source_error_is_raised_as_is(self):
        data = payload(1 * MiB)

        def broken():
            yield from chunked(data[:600 * KiB], 64 * KiB)
            raise IOError("glance went away")
        exc = self.assertRaises(IOError, self.stage, data, broken())
        self.assertEqual("glance went away", str(exc))
        # What was read before the error is written and committed.
        self.assertEqual((576 * KiB, True), self.side("img"))


class TestStageUnhashed(StagingTestCase):
    """``digest=False``: a caller that has every byte checked further on
    (the transfer's sink) stages without a sha512 of its own.
    """

    def test_no_hash_and_nothing_read_back(self):
        data = payload(1 * MiB + 333)
        faulty = FaultyBackend(self.root)
        at = 700 * KiB

        def broken():
            yield from chunked(data[:at], 64 * KiB)
            raise IOError("cut")
        with mock.patch.object(copy.checksum, "ResumableSha512") as h:
            self.assertRaises(IOError, self.stage, data, broken(),
                              backend=faulty, digest=False)
            committed = copy.committed_bytes(faulty, "img", len(data))
            self.assertGreater(committed, 0)
            result = self.stage(data, chunked(data, 77777, committed),
                                offset=committed, backend=faulty,
                                digest=False)
            # Whole again: nothing to do, nothing read.
            again = self.stage(data, iter([]), offset=len(data),
                               backend=faulty, digest=False)
        h.assert_not_called()
        self.assertEqual(0, faulty.calls[("open_read", "img")])
        self.assertEqual((None, committed), (result.sha512, result.start))
        self.assertEqual((None, len(data), 0),
                         (again.sha512, again.start, again.bytes_copied))
        self.assertEqual(data, self.content("img"))
        self.assertEqual((len(data), False), self.side("img"))
        self.assertFalse(os.path.exists(os.path.join(
            self.root, copy.hash_state_file("img"))))

    def test_expected_needs_a_digest(self):
        self.assertRaises(ValueError, self.stage, b"abc", digest=False,
                          expected_sha512=sha(b"abc"))

    def test_wrong_bytes_are_staged_as_they_come(self):
        # The check is someone else's: the sink's, then staged_sha512.
        data = payload(300 * KiB)
        result = self.stage(data, digest=False)
        self.assertIsNone(result.sha512)
        self.assertEqual(sha(data), copy.staged_sha512(
            self.backend, "img", len(data), options(block_size=64 * KiB)))

    def test_invalidated_copy_is_staged_again_into_the_same_file(self):
        data = payload(1 * MiB)
        bad = bytearray(data)
        bad[5000] ^= 0xff
        self.stage(bytes(bad), digest=False)
        self.stage(bytes(bad), name="other")
        ino = os.stat(os.path.join(self.root, "img")).st_ino
        self.assertNotEqual(sha(data), copy.staged_sha512(
            self.backend, "img", len(data)))
        copy.invalidate(self.backend, "img")
        self.assertEqual((0, True), self.side("img"))
        self.assertEqual(0, copy.committed_bytes(self.backend, "img",
                                                 len(data)))
        result = self.stage(data, digest=False)
        self.assertEqual(0, result.start)
        self.assertEqual(data, self.content("img"))
        self.assertEqual(ino, os.stat(os.path.join(self.root, "img")).st_ino)
        # A hashed copy's saved state goes with it, too.  (Written here:
        # a copy saves one only when its watcher sees a partial prefix,
        # which a fast copy may never show.)
        self.stage(payload(600 * MiB // 1024), name="hashed",
                   opts=options(hash_checkpoint=64 * KiB))
        state = os.path.join(self.root, copy.hash_state_file("hashed"))
        self.backend.write_small(copy.hash_state_file("hashed"), b"state")
        self.assertTrue(os.path.exists(state))
        copy.invalidate(self.backend, "hashed")
        self.assertFalse(os.path.exists(state))

    def test_staged_sha512_can_be_cancelled(self):
        data = payload(1 * MiB)
        self.stage(data, digest=False)
        stop = threading.Event()
        stop.set()
        self.assertRaises(backend.CopyCancelled, copy.staged_sha512,
                          self.backend, "img", len(data), cancel=stop)


class TestStagePooled(StagingTestCase):
    """A source with ``readinto`` (a file, an image download) is read
    straight into page-aligned block buffers from the copy's pool, which
    the writers hand on as they are and give back once durable.
    """

    def written(self):
        seen = []
        real = localfs.FileWriter.pwrite

        def pwrite(writer, data, offset):
            view = memoryview(data)
            if os.path.basename(writer.path) != "img":
                return real(writer, data, offset)   # side files
            seen.append((offset, view.readonly or
                         direct.address(view) % direct.ALIGN == 0 and
                         direct.address(view)))
            return real(writer, data, offset)
        self.useFixture(fixtures.MonkeyPatch(
            "dtn_migrate.staging.localfs.FileWriter.pwrite", pwrite))
        return seen

    def test_blocks_are_pooled_and_recycled(self):
        data = payload(64 * 64 * KiB + 777)
        seen = self.written()
        opts = options(block_size=64 * KiB, commit_interval=256 * KiB,
                       writers=2, queue_depth=2)
        with mock.patch.object(buffers, "aligned",
                               wraps=buffers.aligned) as made:
            result = self.stage(data, io.BytesIO(data), opts=opts)
        self.assertEqual(data, self.content("img"))
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(65, len(seen))
        # Every block came aligned and writable; the buffers were used
        # again: far fewer than the blocks, at most the pool.
        self.assertNotIn(True, [a for _o, a in seen])
        self.assertLess(len({a for _o, a in seen}), 20)
        self.assertLessEqual(made.call_count, copy._pool_size(opts))

    def test_readinto_source_checks_its_length(self):
        data = payload(300 * KiB)
        exc = self.assertRaises(backend.ShortData, self.stage, data,
                                io.BytesIO(data[:-5]))
        self.assertIn("ended after %d of %d" % (len(data) - 5, len(data)),
                      str(exc))
        exc = self.assertRaises(backend.ShortData, self.stage, data,
                                io.BytesIO(data + b"x"), name="long")
        self.assertIn("more than the declared", str(exc))
        self.assertNotEqual(len(data), copy.committed_bytes(
            self.backend, "long", len(data)))
        self.assertRaises(backend.ShortData, self.stage, b"",
                          io.BytesIO(b"x"), name="empty")

    def test_zero_blocks_give_their_buffer_back(self):
        data = bytes(40 * 64 * KiB) + payload(64 * KiB)
        opts = options(block_size=64 * KiB, queue_depth=2, writers=1,
                       commit_interval=128 * KiB)
        with mock.patch.object(buffers, "aligned",
                               wraps=buffers.aligned) as made:
            result = self.stage(data, io.BytesIO(data), opts=opts)
        self.assertEqual(40 * 64 * KiB, result.zero_bytes)
        self.assertLess(made.call_count, 10)
        self.assertEqual(data, self.content("img"))


class TestStageSpace(StagingTestCase):
    def test_refused_before_writing(self):
        b = FaultyBackend(self.root, free=1 * MiB)
        data = payload(2 * MiB)
        exc = self.assertRaises(backend.NoSpace, self.stage, data, backend=b)
        message = str(exc)
        self.assertIn(self.root, message)
        self.assertIn("%d more bytes needed" % len(data), message)
        self.assertIn("%d free" % MiB, message)
        self.assertEqual(0, exc.committed)
        # Nothing staged; a follower learns that the copy failed.
        self.assertEqual(0, b.calls[("open_write", "img")])
        self.assertEqual(["img.watermark"], os.listdir(self.root))
        self.assertEqual((0, True), self.side("img"))

    def test_margin_counts(self):
        data = payload(1 * MiB)
        b = FaultyBackend(self.root, free=2 * MiB)
        exc = self.assertRaises(backend.NoSpace, self.stage, data, backend=b,
                                opts=options(free_margin=1536 * KiB))
        self.assertIn("%d of which are kept as margin" % (1536 * KiB),
                      str(exc))
        self.stage(data, backend=b, opts=options(free_margin=1 * MiB))
        self.assertEqual(data, self.content("img"))

    def test_what_is_staged_already_needs_no_space(self):
        data = payload(2 * MiB)
        self.assertRaises(IOError, self.stage, data,
                          self._failing(data, 1 * MiB))
        committed = copy.committed_bytes(self.backend, "img", len(data))
        b = FaultyBackend(self.root, free=len(data) - committed)
        self.stage(data, blocks.file_source(self._file(data)), backend=b)
        self.assertEqual(data, self.content("img"))

    def _failing(self, data, at):
        yield from chunked(data[:at], 64 * KiB)
        raise IOError("cut")

    def _file(self, data):
        path = os.path.join(self.root, "src")
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_enospc_mid_copy_then_resume(self):
        data = payload(2 * MiB)
        full = [True]

        def fault(op, name, offset, length):
            if full[0] and op == "pwrite" and name == "img" and \
                    offset >= 1 * MiB:
                raise backend.NoSpace("write %s: No space left" % name)
        b = FaultyBackend(self.root, fault=fault)
        cell = watermark.Watermark(len(data))
        exc = self.assertRaises(backend.NoSpace, self.stage, data,
                                backend=b, observer=cell.publish)
        message = str(exc)
        self.assertIn("No space left", message)
        self.assertIn(self.root, message)
        committed, failed = self.side("img")
        self.assertTrue(failed)
        self.assertEqual(1 * MiB, committed)
        self.assertEqual(committed, exc.committed)
        self.assertEqual((committed, "failed"), cell.follow())
        self.assertEqual(data[:committed], self.content("img")[:committed])
        # Space freed: a restartable source resumes at the watermark.
        full[0] = False
        asked = []

        def ranged(offset):
            asked.append(offset)
            return chunked(data, 64 * KiB, offset)
        result = self.stage(data, ranged, backend=b,
                            expected_sha512=sha(data))
        self.assertEqual([committed], asked)
        self.assertEqual(committed, result.start)
        self.assertEqual(len(data) - committed, result.bytes_copied)
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(data, self.content("img"))
        self.assertEqual((len(data), False), self.side("img"))

    def test_enospc_at_commit(self):
        # Kernel NFS often reports ENOSPC only when flushing.
        def fault(op, name, offset, length):
            if op == "commit" and name == "img":
                raise backend.NoSpace("commit %s: Disk quota exceeded" % name)
        data = payload(1 * MiB)
        exc = self.assertRaises(backend.NoSpace, self.stage, data,
                                backend=FaultyBackend(self.root, fault=fault))
        self.assertIn("Disk quota exceeded", str(exc))
        self.assertEqual((0, True), self.side("img"))


class TestStageRetry(StagingTestCase):
    def test_unavailable_then_recovers(self):
        failures = [3]

        def fault(op, name, offset, length):
            if op == "pwrite" and offset == 256 * KiB and failures[0]:
                failures[0] -= 1
                raise backend.Unavailable("server not responding")
        b = FaultyBackend(self.root, fault=fault)
        data = payload(1 * MiB)
        result = self.stage(data, backend=b)
        self.assertEqual(3, result.retries)
        self.assertEqual(data, self.content("img"))
        # Initial opens (truncate + 2 writers) and one per retry.
        self.assertEqual(3 + 3, b.calls[("open_write", "img")])

    def test_gives_up_after_retries(self):
        def fault(op, name, offset, length):
            if op == "pwrite" and name == "img" and offset >= 512 * KiB:
                raise backend.StaleHandle("stale file handle")
        b = FaultyBackend(self.root, fault=fault)
        data = payload(1 * MiB)
        exc = self.assertRaises(backend.StaleHandle, self.stage, data,
                                backend=b, opts=options(retries=2))
        self.assertIn("after 2 retries", str(exc))
        self.assertIn("stale file handle", str(exc))
        committed, failed = self.side("img")
        self.assertTrue(failed)
        self.assertEqual(512 * KiB, committed)
        self.assertEqual(data[:committed], self.content("img")[:committed])

    def test_open_failure_is_retried(self):
        failures = [2]

        def fault(op, name, offset, length):
            if op == "open_write" and name == "img" and failures[0]:
                failures[0] -= 1
                raise backend.Unavailable("reconnecting")
        data = payload(300 * KiB)
        b = FaultyBackend(self.root, fault=fault)
        result = self.stage(data, backend=b)
        self.assertEqual(2, result.retries)
        self.assertEqual(data, self.content("img"))
        # Beyond the retries, the failure is published.
        failures[0] = 100
        copy.cleanup(b, "img")
        exc = self.assertRaises(backend.Unavailable, self.stage, data,
                                backend=b, opts=options(retries=1))
        self.assertIn("creating img failed after 1 retries", str(exc))
        self.assertEqual((0, True), self.side("img"))

    def test_server_crash_loses_unstable_writes_which_are_rewritten(self):
        mem = MemBackend()
        data = payload(3 * MiB)
        crashes = {1 * MiB + 64 * KiB, 2 * MiB + 128 * KiB}
        published = []

        def fault(op, name, offset, length):
            if op == "pwrite" and name == "img" and offset in crashes:
                crashes.discard(offset)
                mem.crash()
                raise backend.Unavailable("server rebooted")

        def observer(committed, failed):
            # Every published byte is durable and right.
            durable = mem.files["img"].durable if committed else b""
            published.append(committed)
            self.assertEqual(data[:committed], bytes(durable[:committed]))
        mem.fault = fault
        result = copy.stage(mem, "img", chunked(data, 100 * KiB), len(data),
                            observer=observer,
                            options=options(commit_interval=512 * KiB))
        self.assertEqual(set(), crashes)
        self.assertGreaterEqual(result.retries, 2)
        self.assertEqual(data, bytes(mem.files["img"].durable))
        self.assertEqual(published, sorted(published))
        self.assertEqual(len(data), published[-1])
        self.assertEqual(b"%d\n" % len(data),
                         bytes(mem.files["img.watermark"].durable))


class TestStageCommits(StagingTestCase):
    def test_commit_interval(self):
        b = FaultyBackend(self.root)
        data = payload(4 * MiB)
        published = []
        self.stage(data, backend=b, observer=lambda c, f: published.append(c),
                   opts=options(commit_interval=1 * MiB, writers=1,
                                commit_idle=10))
        self.assertEqual(4, b.calls[("commit", "img")])
        self.assertEqual(len(published),
                         b.calls[("commit", "img.watermark.tmp")])
        self.assertEqual([0, 4 * MiB], [published[0], published[-1]])
        self.assertEqual(published, sorted(set(published)))
        self.assertTrue(all(p % MiB == 0 for p in published), published)

    def test_watermark_is_durable_and_monotonic(self):
        mem = MemBackend()
        data = payload(2 * MiB + 5)
        seen = []

        def observer(committed, failed):
            self.assertFalse(failed)
            seen.append(committed)
            durable = mem.files["img"].durable if committed else b""
            self.assertEqual(data[:committed], bytes(durable[:committed]))
        # A paced source: the watcher sees the prefix grow in steps
        # however fast or loaded the machine is.
        copy.stage(mem, "img", slow(chunked(data, 32 * KiB), 0.004),
                   len(data), observer=observer, options=options(writers=3))
        self.assertEqual(seen, sorted(seen))
        self.assertEqual(len(data), seen[-1])
        self.assertTrue(all(c < len(data) for c in seen[:-1]))
        self.assertGreater(len(seen), 3)

    def test_idle_source_still_commits(self):
        # A slow source: blocks become durable without waiting for the
        # commit interval, so the transfer engine can follow.
        data = payload(256 * KiB)
        cell = watermark.Watermark(len(data))

        def trickle():
            yield data[:128 * KiB]
            test_utils.wait_until(lambda: cell.committed >= 128 * KiB, 5,
                                  interval=0.01)
            yield data[128 * KiB:]
        self.stage(data, trickle(), observer=cell.publish,
                   opts=options(commit_interval=64 * MiB, commit_idle=0.02))
        self.assertEqual(data, self.content("img"))

    def test_progress(self):
        data = payload(2 * MiB)
        reports = []
        result = self.stage(data, slow(chunked(data, 256 * KiB), 0.01),
                            progress=reports.append)
        self.assertGreater(len(reports), 1)
        done = [p.done for p in reports]
        self.assertEqual(done, sorted(done))
        last = reports[-1]
        self.assertEqual((len(data), len(data), len(data)),
                         (last.done, last.committed, last.copied))
        self.assertGreater(last.rate, 0)
        self.assertGreater(result.rate, 0)

    def test_progress_callback_errors_are_ignored(self):
        def bad(p):
            raise RuntimeError("bug in a callback")
        data = payload(100 * KiB)
        self.assertEqual(sha(data), self.stage(data, progress=bad).sha512)


class TestStageCancel(StagingTestCase):
    def test_cancel(self):
        cancel = threading.Event()

        def endless():
            while True:
                time.sleep(0.005)
                yield bytes(64 * KiB)
        threading.Timer(0.2, cancel.set).start()
        began = time.monotonic()
        exc = self.assertRaises(backend.CopyCancelled, copy.stage,
                                FaultyBackend(self.root, free=1 << 50),
                                "img", endless(), 1 << 40, cancel=cancel,
                                options=options())
        self.assertLess(time.monotonic() - began, 3)
        self.assertIn("cancelled", str(exc))
        self.assertTrue(self.side("img")[1])
        self.assertEqual([], copy_threads())

    def test_cancel_while_writers_are_blocked(self):
        cancel = threading.Event()
        gate = threading.Event()

        def fault(op, name, offset, length):
            if op == "pwrite" and name == "img":
                gate.wait(5)
        b = FaultyBackend(self.root, fault=fault)
        data = payload(2 * MiB)
        threading.Timer(0.1, cancel.set).start()
        threading.Timer(0.3, gate.set).start()
        self.assertRaises(backend.CopyCancelled, self.stage, data, backend=b,
                          cancel=cancel)
        self.assertEqual([], copy_threads())


class TestStageResume(StagingTestCase):
    def fail_at(self, data, at, name="img"):
        def broken():
            yield from chunked(data[:at], 64 * KiB)
            raise IOError("cut")
        self.assertRaises(IOError, self.stage, data, broken(), name=name)
        return copy.committed_bytes(self.backend, name, len(data))

    def test_status_and_committed_bytes(self):
        self.assertIsNone(copy.status(self.backend, "img"))
        self.assertEqual(0, copy.committed_bytes(self.backend, "img"))
        data = payload(1 * MiB)
        committed = self.fail_at(data, 700 * KiB)
        self.assertEqual(640 * KiB, committed)
        self.assertEqual((committed, True), copy.status(self.backend, "img"))
        # Not resumable into a smaller image.
        self.assertEqual(0, copy.committed_bytes(self.backend, "img", 1000))

    def test_resume_iterator_from_offset(self):
        data = payload(1 * MiB + 333)
        committed = self.fail_at(data, 700 * KiB)
        result = self.stage(data, chunked(data, 77777, committed),
                            offset=committed, expected_sha512=sha(data))
        self.assertEqual(committed, result.start)
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(data, self.content("img"))

    def test_resume_iterator_below_the_watermark(self):
        data = payload(1 * MiB)
        committed = self.fail_at(data, 700 * KiB)
        result = self.stage(data, chunked(data, 50000, 100000),
                            offset=100000)
        self.assertEqual(100000, result.start)
        self.assertEqual(sha(data), result.sha512)
        self.assertGreater(committed, 100000)

    def test_resume_beyond_the_watermark_is_refused(self):
        data = payload(1 * MiB)
        committed = self.fail_at(data, 300 * KiB)
        exc = self.assertRaises(backend.StagingError, self.stage, data,
                                chunked(data, 50000, committed + 1),
                                offset=committed + 1)
        self.assertIn("only %d bytes" % committed, str(exc))
        self.assertEqual((committed, True), self.side("img"))

    def test_resume_seekable_file(self):
        data = payload(1 * MiB)
        committed = self.fail_at(data, 500 * KiB)
        result = self.stage(data, io.BytesIO(data))
        self.assertEqual(committed, result.start)
        self.assertEqual(data, self.content("img"))

    def test_resume_rehashes_the_prefix(self):
        # The committed prefix is read back: damage there shows in the
        # sha512, it is not trusted blindly.
        data = payload(1 * MiB)
        self.fail_at(data, 700 * KiB)
        with open(os.path.join(self.root, "img"), "r+b") as f:
            f.write(b"X")
        self.assertRaises(backend.ChecksumMismatch, self.stage, data,
                          io.BytesIO(data), expected_sha512=sha(data))

    def test_rehash_retries(self):
        data = payload(1 * MiB)
        committed = self.fail_at(data, 700 * KiB)
        failures = [1]

        def fault(op, name, offset, length):
            if op == "pread" and offset == 64 * KiB and failures[0]:
                failures[0] -= 1
                raise backend.Unavailable("timed out")
        b = FaultyBackend(self.root, fault=fault)
        result = self.stage(data, io.BytesIO(data), backend=b)
        self.assertEqual((committed, 1), (result.start, result.retries))
        self.assertEqual(sha(data), result.sha512)

    def test_iterator_offset_zero_starts_again(self):
        data = payload(1 * MiB)
        self.fail_at(data, 700 * KiB)
        result = self.stage(data)
        self.assertEqual(0, result.start)
        self.assertEqual(data, self.content("img"))

    def test_complete_copy_is_not_repeated(self):
        data = payload(1 * MiB + 1)
        first = self.stage(data)
        calls = []

        def ranged(offset):
            calls.append(offset)
            return chunked(data, 1000, offset)
        again = self.stage(data, ranged, expected_sha512=sha(data))
        self.assertEqual([], calls)
        self.assertEqual(first.sha512, again.sha512)
        self.assertEqual((len(data), 0), (again.start, again.bytes_copied))
        # An iterator source is not even consumed.
        untouched = chunked(data, 1000)
        self.stage(data, untouched)
        self.assertEqual(data[:1000], next(untouched))

    def test_watermark_suffix(self):
        data = payload(100 * KiB)
        opts = options(watermark_suffix=".wm")
        # A chunk of the wrong type fails the copy like any source error.
        self.assertRaises(TypeError, self.stage, data,
                          iter([data[:70 * KiB], None]), opts=opts)
        self.assertEqual(64 * KiB, copy.committed_bytes(
            self.backend, "img", len(data), suffix=".wm"))
        self.assertEqual((64 * KiB, True),
                         copy.status(self.backend, "img", suffix=".wm"))
        self.stage(data, io.BytesIO(data), opts=opts)
        self.assertEqual(["img", "img.wm"], sorted(os.listdir(self.root)))
        copy.cleanup(self.backend, "img", suffix=".wm")
        self.assertEqual([], os.listdir(self.root))

    def test_side_file_can_be_disabled(self):
        data = payload(100 * KiB)
        self.stage(data, opts=options(side_file=False))
        self.assertEqual(["img"], os.listdir(self.root))


class TestCleanup(StagingTestCase):
    def test_cleanup(self):
        data = payload(100 * KiB)
        self.stage(data, name="d/img")
        open(os.path.join(self.root, "d", "img.watermark.tmp"), "w").close()
        copy.cleanup(self.backend, "d/img")
        self.assertEqual([], os.listdir(os.path.join(self.root, "d")))
        copy.cleanup(self.backend, "d/img")


# With the transfer engine.

class TestWithTransferEngine(StagingTestCase):
    """Local copy → transfer engine → remote copy, all at once."""

    def cfg(self):
        return config.TransferConfig(
            object_size=256 * KiB, window_bytes=4 * MiB, sync_bytes=1 * MiB,
            sync_interval=0.01, min_free_bytes=0,
            reconnect_initial_interval=0.05, reconnect_max_interval=0.2,
            connect_timeout=2.0)

    def test_pipeline(self):
        src = os.path.join(self.root, "src")
        dst = os.path.join(self.root, "dst")
        state = os.path.join(self.root, "state")
        os.makedirs(src)
        os.makedirs(dst)
        export, peer_export = (localfs.LocalBackend(src),
                               localfs.LocalBackend(dst))
        data = payload(6 * MiB + 12345)
        # The service creates the empty file and watermark first.
        export.open_write("img").close()
        watermark.publish(export, "img", 0)

        server = sink.SinkServer(dst, self.cfg(), "sink",
                                 lambda p: KEY if p == "source" else None,
                                 host="127.0.0.1")
        server.start()
        self.addCleanup(server.stop)
        spec = dataset.FileSpec(
            name="img", path=os.path.join(src, "img"), size=len(data),
            sha512=sha(data), growing=True,
            watermark_file=os.path.join(src, "img.watermark"))
        transfer = source.SourceTransfer(
            dataset.Manifest.new("sink", [spec]),
            source.Peer("sink", "127.0.0.1", server.port, KEY), self.cfg(),
            state, "source")
        self.addCleanup(transfer.close)
        sent = {}
        sender = threading.Thread(target=lambda: sent.update(transfer.run()))
        sender.start()
        self.addCleanup(sender.join, 30)

        staged = {}
        stager = threading.Thread(target=lambda: staged.update(
            result=copy.stage(export, "img",
                              slow(chunked(data, 200 * KiB), 0.005),
                              len(data), options=options(
                                  block_size=256 * KiB,
                                  commit_interval=512 * KiB))))
        stager.start()
        self.addCleanup(stager.join, 30)

        # The remote copy follows the sink's durable prefix meanwhile.
        durable = []

        def info():
            i = server.watermark(transfer.transfer_id, "img")
            if i:
                durable.append(i.get("durable", 0))
            return i
        stream = staging_stream.open_staged(
            peer_export, "img", len(data), sha(data),
            follow=watermark.sink_follower(info, root=dst),
            options=options(block_size=256 * KiB, stall_timeout=30))
        received = b"".join(stream)

        stager.join(30)
        sender.join(30)
        self.assertEqual(sha(data), staged["result"].sha512)
        self.assertEqual("complete", sent.get("state"), sent.get("error"))
        self.assertEqual(data, received)
        with open(os.path.join(dst, "img"), "rb") as f:
            self.assertEqual(data, f.read())
        self.assertTrue(any(0 < d < len(data) for d in durable), durable)
        # After the peer has it, the staged copy goes.
        copy.cleanup(export, "img")
        self.assertEqual([], os.listdir(src))
