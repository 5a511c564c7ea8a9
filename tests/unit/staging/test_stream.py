"""The copy engine's remote copy (StagedStream, open_staged), on the
fakes and helpers of test_copy.py.
"""

import hashlib
import os
import shutil
import tempfile
import threading
import time


from dtn_migrate.staging import backend
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import localfs
from dtn_migrate.staging import stream as staging_stream
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import direct
from tests.unit.staging.test_copy import (
    FaultyBackend, KiB, MemBackend, MiB, StagingTestCase, chunked,
    copy_threads, options, payload, sha, slow)
from tests.unit import testcase


# Remote copy.

class TestStagedStream(StagingTestCase):
    def test_iterate(self):
        data = payload(1 * MiB + 5)
        self.put(data)
        for readers in (1, 2, 4):
            for block in (1000, 64 * KiB, 2 * MiB):
                stream = staging_stream.open_staged(
                    self.backend, "img", len(data), sha(data),
                    options=options(block_size=block, readers=readers))
                blocks = list(stream)
                self.assertEqual(data, b"".join(blocks))
                self.assertTrue(all(len(b) <= block for b in blocks))
                self.assertEqual(sha(data), stream.result.sha512)
                self.assertEqual(len(data), stream.result.size)

    def test_read(self):
        data = payload(300 * KiB + 1)
        self.put(data)
        for n in (1, 1000, 64 * KiB, 200 * KiB):
            with staging_stream.open_staged(self.backend, "img", len(data),
                                            options=options()) as stream:
                parts = []
                while True:
                    part = stream.read(n)
                    if not part:
                        break
                    self.assertLessEqual(len(part), n)
                    parts.append(part)
                self.assertEqual(data, b"".join(parts))
                self.assertEqual(b"", stream.read(10))
        with staging_stream.open_staged(self.backend, "img", len(data),
                                        options=options()) as stream:
            self.assertEqual(data[:10], stream.read(10))
            self.assertEqual(data[10:], stream.read())

    def test_zero_length(self):
        self.put(b"")
        stream = staging_stream.open_staged(self.backend, "img", 0, sha(b""))
        self.assertEqual([], list(stream))
        self.assertEqual(sha(b""), stream.result.sha512)

    def test_mismatch_never_yields_the_last_block(self):
        data = payload(500 * KiB)
        self.put(data)
        stream = staging_stream.open_staged(self.backend, "img", len(data),
                                            sha(b"other"), options=options())
        got = []
        exc = self.assertRaises(backend.ChecksumMismatch,
                                lambda: got.extend(stream))
        self.assertIn(sha(data), str(exc))
        self.assertLess(sum(map(len, got)), len(data))
        self.assertIsNone(stream.result)

    def test_size_must_match_when_complete(self):
        data = payload(100 * KiB)
        self.put(data)
        for size in (len(data) - 1, len(data) + 1):
            stream = staging_stream.open_staged(self.backend, "img", size)
            exc = self.assertRaises(backend.ShortData, list, stream)
            self.assertIn("expected %d" % size, str(exc))
        stream = staging_stream.open_staged(self.backend, "missing", 10)
        self.assertRaises(backend.ShortData, list, stream)

    def test_file_shrinking_under_the_reader(self):
        data = payload(200 * KiB)
        self.put(data)
        stream = staging_stream.open_staged(
            self.backend, "img", len(data),
            options=options(readers=1, queue_depth=1))
        first = next(stream)
        os.truncate(os.path.join(self.root, "img"), 100 * KiB)
        exc = self.assertRaises(backend.ShortData, list, stream)
        self.assertIn("ends at", str(exc))
        self.assertTrue(first)

    def test_retry_on_unavailable(self):
        data = payload(500 * KiB)
        self.put(data)
        failures = [2]

        def fault(op, name, offset, length):
            if op == "pread" and offset == 128 * KiB and failures[0]:
                failures[0] -= 1
                raise backend.Unavailable("timed out")
        b = FaultyBackend(self.root, fault=fault)
        stream = staging_stream.open_staged(b, "img", len(data), sha(data),
                                            options=options())
        self.assertEqual(data, b"".join(stream))
        self.assertEqual(2, stream.result.retries)

    def test_gives_up_after_retries(self):
        data = payload(500 * KiB)
        self.put(data)

        def fault(op, name, offset, length):
            if op == "pread" and offset == 128 * KiB:
                raise backend.StaleHandle("stale")
        stream = staging_stream.open_staged(
            FaultyBackend(self.root, fault=fault),
            "img", len(data),
            options=options(retries=3))
        exc = self.assertRaises(backend.StaleHandle, list, stream)
        self.assertIn("after 3 retries", str(exc))

    def test_plain_stream_does_not_look_for_a_new_name(self):
        # Only a followed file can be renamed under its reader: a plain
        # stream whose file vanishes fails at once, opened once.
        data = payload(500 * KiB)
        self.put(data)

        def fault(op, name, offset, length):
            if op == "pread" and offset == 128 * KiB:
                os.unlink(os.path.join(self.root, "img"))
                raise backend.StaleHandle("stale")
        b = FaultyBackend(self.root, fault=fault)
        stream = staging_stream.open_staged(b, "img", len(data), sha(data),
                                            options=options(readers=1,
                                                            stall_timeout=30))
        began = time.monotonic()
        self.assertRaises(backend.StagingNotFound, list, stream)
        self.assertLess(time.monotonic() - began, 5)
        self.assertEqual(2, b.calls["open_read"])

    def test_progress(self):
        data = payload(1 * MiB)
        self.put(data)
        reports = []
        stream = staging_stream.open_staged(
            self.backend, "img", len(data),
            options=options(progress_interval=0),
            progress=reports.append)
        list(stream)
        self.assertEqual(len(data), reports[-1].done)
        self.assertEqual([p.done for p in reports],
                         sorted(p.done for p in reports))

    def test_close_early_joins_threads(self):
        data = payload(2 * MiB)
        self.put(data)
        stream = staging_stream.open_staged(self.backend, "img", len(data),
                                            options=options(queue_depth=2))
        next(stream)
        stream.close()
        self.assertEqual([], copy_threads())
        self.assertRaises(StopIteration, next, stream)

    def test_abandoned_generator_joins_threads(self):
        data = payload(2 * MiB)
        self.put(data)
        with staging_stream.open_staged(self.backend, "img", len(data),
                                        options=options()) as stream:
            stream.read(10)
        self.assertEqual([], copy_threads())


class TestStagedStreamReusedBuffers(StagingTestCase):
    """reuse_buffers: blocks are views of a pool of queue_depth + 1
    page-aligned buffers, read into in place.
    """

    def open(self, data, **kw):
        self.put(data)
        opts = options(queue_depth=2, readers=2)
        return staging_stream.open_staged(
            self.backend, "img", len(data), sha(data),
            options=opts, reuse_buffers=True, **kw)

    def test_blocks_are_views_of_a_few_recycled_buffers(self):
        data = payload(20 * 64 * KiB + 7)
        stream = self.open(data)
        seen, got = set(), []
        for block in stream:
            self.assertIsInstance(block, memoryview)
            seen.add(direct.address(block))
            got.append(bytes(block))
        self.assertEqual(data, b"".join(got))
        self.assertEqual(sha(data), stream.result.sha512)
        self.assertLessEqual(stream.pool.allocated, 3)
        self.assertLessEqual(len(seen), 3)
        self.assertTrue(all(a % direct.ALIGN == 0 for a in seen))

    def test_read_all_copies_each_block_before_the_next(self):
        # 21 blocks through 3 buffers: joining the views themselves
        # would hand back recycled memory.
        data = payload(20 * 64 * KiB + 7)
        with self.open(data) as stream:
            self.assertEqual(data[:10], stream.read(10))
            self.assertEqual(data[10:], stream.read())

    def test_read_in_pieces(self):
        data = payload(5 * 64 * KiB + 3)
        with self.open(data) as stream:
            parts = iter(lambda: stream.read(50 * KiB), b"")
            self.assertEqual(data, b"".join(parts))

    def test_the_backend_reads_into_the_buffers(self):
        data = payload(3 * 64 * KiB)
        calls = []
        real = localfs.FileReader.readinto

        def readinto(reader, view, offset, length=None):
            calls.append((direct.address(view), offset, length))
            return real(reader, view, offset, length)
        self.patch(localfs.FileReader, "readinto", readinto)
        with self.open(data) as stream:
            got = [(direct.address(b), bytes(b)) for b in stream]
        self.assertEqual(data, b"".join(b for _a, b in got))
        self.assertEqual(sorted((a, o, 64 * KiB) for a, o in
                                zip([a for a, _b in got],
                                    range(0, len(data), 64 * KiB))),
                         sorted(calls))

    def test_mismatch_never_yields_the_last_block(self):
        data = payload(5 * 64 * KiB)
        self.put(data)
        stream = staging_stream.open_staged(self.backend, "img", len(data),
                                            sha(b"other"), options=options(),
                                            reuse_buffers=True)
        got = []
        self.assertRaises(backend.ChecksumMismatch,
                          lambda: got.extend(bytes(b) for b in stream))
        self.assertEqual(4 * 64 * KiB, sum(map(len, got)))

    def test_closed_early_stops_the_readers(self):
        data = payload(40 * 64 * KiB)
        stream = self.open(data)
        self.assertEqual(data[:64 * KiB], bytes(next(stream)))
        stream.close()
        self.assertEqual([], copy_threads())

    def test_a_backend_without_readinto_of_its_own(self):
        # Reader.readinto's default copies what pread gives.
        data = payload(3 * 64 * KiB + 5)
        be = MemBackend()
        with be.open_write("img") as w:
            w.pwrite(data, 0)
        with staging_stream.open_staged(
                be, "img", len(data), sha(data),
                options=options(), reuse_buffers=True) as s:
            self.assertEqual(data, b"".join(bytes(b) for b in s))


class TestStagedStreamFollow(StagingTestCase):
    def test_follows_a_concurrent_local_copy(self):
        data = payload(3 * MiB + 99)
        cell = watermark.Watermark(len(data))
        box = {}
        writer = threading.Thread(target=lambda: box.update(
            result=self.stage(data, slow(chunked(data, 100 * KiB), 0.002),
                              observer=cell.publish)))
        writer.start()
        while not os.path.exists(os.path.join(self.root, "img")):
            time.sleep(0.001)
        stream = staging_stream.open_staged(self.backend, "img", len(data),
                                            sha(data), follow=cell.follow,
                                            options=options())
        got = b"".join(stream)
        writer.join()
        self.assertEqual(data, got)
        self.assertEqual(box["result"].sha512, stream.result.sha512)

    def test_follows_the_side_file(self):
        data = payload(2 * MiB)
        follow = watermark.side_file_follower(self.backend, "img")
        seen = []

        def spy():
            value = follow()
            seen.append(value[0])
            return value
        writer = threading.Thread(target=self.stage, args=(
            data, slow(chunked(data, 64 * KiB), 0.003)))
        # The stream starts first: the file does not exist yet.
        stream = staging_stream.open_staged(
            self.backend, "img", len(data),
            sha(data), follow=spy, options=options())
        writer.start()
        self.assertEqual(data, b"".join(stream))
        writer.join()
        self.assertTrue(any(0 < v < len(data) for v in seen), seen)

    def test_never_reads_beyond_the_watermark(self):
        mem = MemBackend()
        data = payload(1 * MiB)
        with mem.open_write("img") as w:
            w.pwrite(data, 0)
        available = [0]
        reads = []

        def fault(op, name, offset, length):
            if op == "pread":
                reads.append((offset + length, available[0]))

        def follow():
            available[0] = min(len(data), available[0] + 100000)
            return available[0], "open"
        mem.fault = fault
        stream = staging_stream.open_staged(mem, "img", len(data), sha(data),
                                            follow=follow, options=options())
        self.assertEqual(data, b"".join(stream))
        self.assertTrue(all(end <= avail for end, avail in reads))

    def pushed_follower(self, size):
        """A follower whose value a test pushes, with a ``wait`` that
        wakes on a push (as the engine's event board does).
        """
        cond = threading.Condition()
        state = {"durable": 0, "seq": 0, "waits": [], "woken": 0}
        seen = threading.local()

        def info():
            with cond:
                seen.seq = state["seq"]
                return {"durable": state["durable"],
                        "state": "done" if state["durable"] >= size
                        else "open"}

        def wait(seconds):
            state["waits"].append(seconds)
            with cond:
                woken = cond.wait_for(
                    lambda: state["seq"] > getattr(seen, "seq", 0), seconds)
                state["woken"] += bool(woken)
                return woken

        def push(durable):
            with cond:
                state["durable"] = durable
                state["seq"] += 1
                cond.notify_all()
        return watermark.sink_follower(info, wait=wait), push, state

    def test_a_pushed_value_is_read_at_once_not_after_the_poll_wait(self):
        # Polls 60 s apart: the stream ends only because each push wakes
        # the reader, and it waited for nothing but the pushes.
        data = payload(8 * 64 * KiB)
        self.put(data)
        follow, push, state = self.pushed_follower(len(data))
        opts = options(poll_initial=60, poll_max=60, readers=2)
        ends = list(range(64 * KiB, len(data), 128 * KiB)) + [len(data)]
        pusher = threading.Thread(target=lambda: [
            (time.sleep(0.02), push(end)) for end in ends])
        began = time.monotonic()
        with staging_stream.open_staged(
                self.backend, "img", len(data),
                follow=follow, options=opts, digest=False,
                until_done=True) as stream:
            pusher.start()
            got = b"".join(stream)
        pusher.join()
        self.assertEqual(data, got)
        self.assertLess(time.monotonic() - began, 30)
        self.assertGreater(state["woken"], 0)
        self.assertTrue(all(0 < w <= 0.1 for w in state["waits"]),
                        state["waits"])

    def test_cancel_while_waiting_on_the_follower(self):
        # Polls 60 s apart and no push: the readers wait on the
        # follower, and still stop within its 0.1 s slices.
        data = payload(4 * 64 * KiB)
        self.put(data)
        follow, _push, state = self.pushed_follower(len(data))
        cancel = threading.Event()
        stream = staging_stream.open_staged(
            self.backend, "img", len(data), follow=follow, digest=False,
            options=options(poll_initial=60, poll_max=60), cancel=cancel)
        failed = []
        consumer = threading.Thread(target=lambda: failed.append(
            self.assertRaises(backend.CopyCancelled, list, stream)))
        consumer.start()
        while not state["waits"]:
            time.sleep(0.01)
        cancel.set()
        consumer.join(30)
        self.assertFalse(consumer.is_alive())
        self.assertEqual(1, len(failed))
        self.assertEqual([], copy_threads())

    def test_done_state_makes_everything_available(self):
        data = payload(300 * KiB)
        self.put(data)
        stream = staging_stream.open_staged(
            self.backend, "img", len(data), sha(data),
            follow=lambda: (0, "done"))
        self.assertEqual(data, b"".join(stream))

    def test_writer_failure(self):
        data = payload(300 * KiB)
        self.put(data)
        stream = staging_stream.open_staged(
            self.backend, "img", len(data),
            follow=lambda: (64 * KiB, "mismatch"),
            options=options())
        exc = self.assertRaises(backend.WriterFailed, list, stream)
        self.assertIn("mismatch", str(exc))

    def test_stall(self):
        data = payload(300 * KiB)
        self.put(data)
        stream = staging_stream.open_staged(self.backend, "img", len(data),
                                            follow=lambda: (64 * KiB, "open"),
                                            options=options(stall_timeout=0.2))
        began = time.monotonic()
        got = []
        exc = self.assertRaises(backend.CopyStalled,
                                lambda: got.extend(stream))
        self.assertLess(time.monotonic() - began, 3)
        self.assertIn("has not grown past %d" % (64 * KiB), str(exc))
        self.assertEqual(data[:64 * KiB], b"".join(got))

    def test_cancel(self):
        cancel = threading.Event()
        stream = staging_stream.open_staged(
            self.backend, "img", 1 * MiB,
            follow=lambda: (0, None), cancel=cancel,
            options=options(poll_max=0.05))
        threading.Timer(0.2, cancel.set).start()
        began = time.monotonic()
        self.assertRaises(backend.CopyCancelled, list, stream)
        self.assertLess(time.monotonic() - began, 3)
        self.assertEqual([], copy_threads())

    def test_reopens_under_the_current_name(self):
        # The sink renames its partial copy when complete; a reader that
        # must reopen uses the name the follower gives now.
        data = payload(500 * KiB)
        self.put(data, name="part")
        state = {"name": "part", "failed": False}

        def follow():
            return len(data), "done", state["name"]

        def fault(op, name, offset, length):
            if op == "pread" and offset >= 256 * KiB and \
                    not state["failed"]:
                state["failed"] = True
                os.rename(os.path.join(self.root, "part"),
                          os.path.join(self.root, "final"))
                state["name"] = "final"
                raise backend.StaleHandle("stale")
        b = FaultyBackend(self.root, fault=fault)
        stream = staging_stream.open_staged(
            b, "final", len(data), sha(data),
            follow=follow, options=options(readers=1))
        self.assertEqual(data, b"".join(stream))


class TestFollowedRename(testcase.TestCase):
    """A followed file renamed between the follower's answer and the
    open (the sink installs its partial copy) is opened by its new name.
    """

    def staged(self, name):
        """A temporary export root holding 300000 random bytes as
        ``name``; returns (root, the bytes).
        """
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root, True)
        data = os.urandom(300000)
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
        return root, data

    def test_reopens_by_new_name(self):
        root, data = self.staged("final")
        answers = iter([(len(data), "done", "partial")] * 3)

        def follow():
            return next(answers, (len(data), "done", "final"))
        stream = staging_stream.open_staged(
            localfs.LocalBackend(root), "final", len(data),
            hashlib.sha512(data).hexdigest(), follow=follow,
            options=copycommon.CopyOptions(block_size=65536, readers=1))
        with stream:
            self.assertEqual(data, b"".join(bytes(b) for b in stream))

    def follow_late(self, delay, root, data):
        """A follower that, like the agent, names the partial copy for
        ``delay`` seconds after it was renamed to "final".
        """
        renamed = []

        def follow():
            if not renamed:
                os.rename(os.path.join(root, "partial"),
                          os.path.join(root, "final"))
                renamed.append(time.monotonic())
            late = time.monotonic() - renamed[0] < delay
            return len(data), "done", "partial" if late else "final"
        return follow

    def test_new_name_known_late(self):
        # Longer than any fixed number of short retries: bounded by the
        # stall timeout only.
        root, data = self.staged("partial")
        stream = staging_stream.open_staged(
            localfs.LocalBackend(root), "final", len(data),
            hashlib.sha512(data).hexdigest(),
            follow=self.follow_late(1.0, root, data),
            options=copycommon.CopyOptions(block_size=65536, readers=2,
                                           poll_initial=0.01, poll_max=0.1,
                                           stall_timeout=30))
        with stream:
            self.assertEqual(data, b"".join(bytes(b) for b in stream))

    def test_new_name_never_known(self):
        root, data = self.staged("partial")
        stream = staging_stream.open_staged(
            localfs.LocalBackend(root), "final", len(data),
            follow=self.follow_late(3600, root, data),
            options=copycommon.CopyOptions(block_size=65536, readers=1,
                                           poll_initial=0.01, poll_max=0.05,
                                           stall_timeout=0.5))
        began = time.monotonic()
        with stream:
            exc = self.assertRaises(backend.StagingNotFound, list, stream)
        self.assertLess(time.monotonic() - began, 5)
        self.assertGreaterEqual(time.monotonic() - began, 0.5)
        self.assertIn("not found under the name its follower gives",
                      str(exc))
