"""Import side without its own sha512: the last block waits for the
writer's (the sink's) word that the file is verified.
"""

import hashlib
import os
import threading
from unittest import mock

from dtn_migrate.staging import backend
from dtn_migrate.staging import copy
from dtn_migrate.staging import localfs
from dtn_migrate.staging import stream as staging_stream
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from tests.unit.staging import test_copy
from tests.unit.staging.test_copy import (
    KEY, KiB, MiB, StagingTestCase, chunked, options, payload, sha, slow)
from tests.unit import utils as test_utils

BLOCK = 64 * KiB


class Scripted:
    """A follower whose answer the test sets; records what it said."""

    def __init__(self, durable=0, state="open"):
        self.lock = threading.Lock()
        self.durable, self.state = durable, state
        self.asked = 0

    def set(self, durable=None, state=None):
        with self.lock:
            if durable is not None:
                self.durable = durable
            if state is not None:
                self.state = state

    def __call__(self):
        with self.lock:
            self.asked += 1
            return self.durable, self.state, None


class Consumer(threading.Thread):
    """Iterates a stream in a thread, keeping the blocks it got."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.got, self.error = stream, [], None

    def run(self):
        try:
            for block in self.stream:
                self.got.append(bytes(block))
        except Exception as exc:
            self.error = exc

    def received(self):
        return sum(map(len, self.got))


def wait_for(predicate, timeout=5.0):
    if not test_utils.wait_until(predicate, timeout, interval=0.005):
        raise AssertionError("timed out")


class TestUntilDone(StagingTestCase):
    def setUp(self):
        super().setUp()
        self.data = payload(5 * BLOCK + 1000)
        with open(os.path.join(self.root, "img"), "wb") as f:
            f.write(self.data)

    def open(self, follow, **kw):
        kw.setdefault("options", options(block_size=BLOCK))
        stream = staging_stream.open_staged(
            self.backend, "img", len(self.data),
            follow=follow, digest=False,
            until_done=True, **kw)
        self.addCleanup(stream.close)
        return stream

    def test_last_block_waits_for_done(self):
        follow = Scripted(len(self.data), "closing")   # complete, unverified
        c = Consumer(self.open(follow))
        c.start()
        wait_for(lambda: c.received() == 5 * BLOCK)
        asked = follow.asked
        wait_for(lambda: follow.asked > asked + 3)      # still asking
        self.assertEqual(5 * BLOCK, c.received())       # last held back
        follow.set(state=watermark.DONE)
        c.join(5)
        self.assertIsNone(c.error)
        self.assertEqual(self.data, b"".join(c.got))
        self.assertIsNone(c.stream.result.sha512)

    def test_no_sha512_is_computed(self):
        follow = Scripted(len(self.data), watermark.DONE)
        with mock.patch.object(staging_stream.hashlib, "sha512",
                               side_effect=AssertionError("hashed")):
            got = b"".join(self.open(follow))
        self.assertEqual(self.data, got)

    def test_mismatch_never_gives_the_last_block(self):
        follow = Scripted(len(self.data), "closing")
        c = Consumer(self.open(follow))
        c.start()
        wait_for(lambda: c.received() == 5 * BLOCK)
        follow.set(state=watermark.MISMATCH)
        c.join(5)
        self.assertIsInstance(c.error, backend.WriterMismatch)
        self.assertIsInstance(c.error, backend.ChecksumMismatch)
        self.assertIsInstance(c.error, backend.WriterFailed)
        self.assertEqual(5 * BLOCK, c.received())

    def test_failure_while_unverified(self):
        follow = Scripted(len(self.data), "closing")
        c = Consumer(self.open(follow))
        c.start()
        wait_for(lambda: c.received() == 5 * BLOCK)
        follow.set(state=watermark.FAILED)
        c.join(5)
        self.assertIsInstance(c.error, backend.WriterFailed)
        self.assertNotIsInstance(c.error, backend.ChecksumMismatch)

    def test_never_verified_stalls(self):
        follow = Scripted(len(self.data), "closing")
        stream = self.open(follow, options=options(block_size=BLOCK,
                                                   stall_timeout=0.2))
        got = []
        self.assertRaises(backend.CopyStalled,
                          lambda: got.extend(stream))
        self.assertEqual(5 * BLOCK, sum(map(len, got)))

    def test_cancel_while_waiting(self):
        follow = Scripted(len(self.data), "closing")
        cancel = threading.Event()
        c = Consumer(self.open(follow, cancel=cancel))
        c.start()
        wait_for(lambda: c.received() == 5 * BLOCK)
        cancel.set()
        c.join(5)
        self.assertFalse(c.is_alive())
        self.assertIsInstance(c.error, backend.CopyCancelled)
        self.assertEqual(5 * BLOCK, c.received())

    def test_growing_file(self):
        follow = Scripted(0, "open")
        c = Consumer(self.open(follow))
        c.start()
        for durable in (BLOCK, 3 * BLOCK, len(self.data)):
            follow.set(durable)
            wait_for(lambda: c.received() >= min(durable, 5 * BLOCK))
        self.assertEqual(5 * BLOCK, c.received())
        follow.set(state=watermark.DONE)
        c.join(5)
        self.assertEqual(self.data, b"".join(c.got))

    def test_empty_file_waits_too(self):
        open(os.path.join(self.root, "empty"), "wb").close()
        follow = Scripted(0, "closing")
        stream = staging_stream.open_staged(
            self.backend, "empty", 0, follow=follow,
            digest=False, until_done=True,
            options=options())
        c = Consumer(stream)
        c.start()
        wait_for(lambda: follow.asked > 2)
        self.assertTrue(c.is_alive())
        follow.set(state=watermark.DONE)
        c.join(5)
        self.assertEqual(([], None), (c.got, c.error))

    def test_arguments(self):
        self.assertRaises(ValueError, staging_stream.open_staged,
                          self.backend, "img", 1, until_done=True)
        self.assertRaises(ValueError, staging_stream.open_staged,
                          self.backend, "img", 1,
                          expected_sha512=sha(b"x"), digest=False)

    def test_read_api_holds_the_tail_too(self):
        follow = Scripted(len(self.data), "closing")
        stream = self.open(follow)
        got = []
        reader = threading.Thread(target=lambda: got.append(stream.read()),
                                  daemon=True)
        reader.start()
        wait_for(lambda: follow.asked > 3)
        self.assertEqual([], got)
        follow.set(state=watermark.DONE)
        reader.join(5)
        self.assertEqual([self.data], got)


class TestUntilDoneWithSink(StagingTestCase):
    """The sink's own states drive the guard: the last block reaches the
    consumer only once SinkServer.watermark says ``done``.
    """

    cfg = test_copy.TestWithTransferEngine.cfg

    def test_pipeline_without_import_sha512(self):
        src = os.path.join(self.root, "src")
        dst = os.path.join(self.root, "dst")
        os.makedirs(src)
        os.makedirs(dst)
        export, peer_export = (localfs.LocalBackend(src),
                               localfs.LocalBackend(dst))
        data = bytearray(payload(4 * MiB + 777))
        data[MiB:3 * MiB] = bytes(2 * MiB)          # a zero run
        data = bytes(data)
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
            os.path.join(self.root, "state"), "source")
        self.addCleanup(transfer.close)
        sent = {}
        sender = threading.Thread(target=lambda: sent.update(transfer.run()))
        sender.start()
        self.addCleanup(sender.join, 30)
        staged = {}
        stager = threading.Thread(target=lambda: staged.update(
            result=copy.stage(export, "img",
                              slow(chunked(data, 200 * KiB), 0.003),
                              len(data), options=options(
                                  block_size=256 * KiB,
                                  commit_interval=512 * KiB))))
        stager.start()
        self.addCleanup(stager.join, 30)

        states = []

        def info():
            i = server.watermark(transfer.transfer_id, "img")
            states.append(i and i.get("state"))
            return i
        stream = staging_stream.open_staged(
            peer_export, "img", len(data), expected_sha512=None,
            digest=False, until_done=True,
            follow=watermark.sink_follower(info, root=dst),
            options=options(block_size=256 * KiB, stall_timeout=30))
        received = []
        for block in stream:
            if len(received) * 256 * KiB + len(block) == len(data):
                # The last block: the sink said done before it came.
                self.assertEqual(watermark.DONE, states[-1])
            received.append(bytes(block))
        stager.join(30)
        sender.join(30)
        self.assertEqual("complete", sent.get("state"), sent.get("error"))
        self.assertEqual(data, b"".join(received))
        self.assertEqual(hashlib.sha512(data).hexdigest(),
                         staged["result"].sha512)
        self.assertEqual(2 * MiB, staged["result"].zero_bytes)
        self.assertIsNone(stream.result.sha512)
