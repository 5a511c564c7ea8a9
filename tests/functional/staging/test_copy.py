"""The copy engine over a real NFS server: nfs-ganesha and libnfs.

Local copies stage image bytes onto a ganesha export through libnfs,
remote copies read them back; the faults are real ones: the server is
killed, the export fills up or is read-only, a file handle goes stale, and
the copying process itself is killed with SIGKILL.  The last test runs
the pipeline: a growing file staged over NFS across a 1 gbit veth while
the transfer engine sends it, following the committed watermark.
"""

import hashlib
import os
import subprocess
import sys
import threading
import time

import fixtures

from dtn_migrate.staging import backend
from dtn_migrate.staging import blocks
from dtn_migrate.staging import copy
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import stream as staging_stream
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import config
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from tests.functional.staging import test_libnfs

KiB = 1 << 10
MiB = 1 << 20
KEY = b"k" * 32


def sha(data):
    return hashlib.sha512(data).hexdigest()


def chunks(data, size, start=0, pause=0.0, hook=None):
    """``data[start:]`` in pieces of ``size``; ``hook(offset)`` before
    each piece.
    """
    for off in range(start, len(data), size):
        if hook is not None:
            hook(off)
        if pause:
            time.sleep(pause)
        yield data[off:off + size]


def options(**kw):
    kw.setdefault("block_size", MiB)
    kw.setdefault("commit_interval", 4 * MiB)
    kw.setdefault("free_margin", 0)
    kw.setdefault("retry_initial", 0.2)
    return copycommon.CopyOptions(**kw)


def local_bytes(srv, name):
    with open(srv.local(name), "rb") as f:
        return f.read()


class TestStageAndRead(test_libnfs.LibnfsTestCase):

    def test_across_veth_bit_exact_and_cleanup(self):
        lab = self.lab("1gbit")
        srv = self.server(lab=lab)
        be = self.backend(srv)
        data = os.urandom(24 * MiB + 4321)
        # A Glance download hands out 64 KiB chunks.
        result = copy.stage(be, "images/img-1", chunks(data, 64 * KiB),
                            len(data), expected_sha512=sha(data),
                            options=options())
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(len(data), result.bytes_copied)
        self.assertEqual(data, local_bytes(srv, "images/img-1"))
        self.assertEqual((len(data), False),
                         copy.status(be, "images/img-1"))
        with staging_stream.open_staged(
                be, "images/img-1", len(data), sha(data),
                options=options()) as stream:
            self.assertEqual(data, b"".join(stream))
        # As the import reads: libnfs fills the pool's buffers in place.
        with staging_stream.open_staged(
                be, "images/img-1", len(data), sha(data),
                options=options(queue_depth=2),
                reuse_buffers=True) as stream:
            blocks = [(type(b), bytes(b)) for b in stream]
        self.assertEqual({memoryview}, {t for t, _b in blocks})
        self.assertEqual(data, b"".join(b for _t, b in blocks))
        self.assertLessEqual(stream.pool.allocated, 3)
        copy.cleanup(be, "images/img-1")
        self.assertFalse(os.path.exists(srv.local("images/img-1")))
        self.assertFalse(os.path.exists(srv.local("images/img-1.watermark")))

    def test_stage_again_is_idempotent(self):
        srv = self.server()
        be = self.backend(srv)
        data = os.urandom(5 * MiB)
        copy.stage(be, "img", chunks(data, MiB), len(data),
                   options=options())
        again = copy.stage(be, "img", chunks(data, MiB), len(data),
                           expected_sha512=sha(data), options=options())
        self.assertEqual(sha(data), again.sha512)
        self.assertEqual(len(data), again.start)
        self.assertEqual(0, again.bytes_copied)

    def test_remote_copy_refuses_wrong_bytes(self):
        srv = self.server()
        be = self.backend(srv)
        data = os.urandom(3 * MiB)
        copy.stage(be, "img", chunks(data, MiB), len(data),
                   options=options())
        # The last byte changed (a zero byte set to zero would not be).
        wrong = sha(data[:-1] + bytes([data[-1] ^ 0xFF]))
        got = bytearray()
        stream = staging_stream.open_staged(be, "img", len(data), wrong,
                                            options=options())
        exc = self.assertRaises(backend.ChecksumMismatch,
                                lambda: [got.extend(b) for b in stream])
        self.assertIn("img", str(exc))
        # The last block is never handed out when the hash is wrong.
        self.assertLess(len(got), len(data))


class TestServerFaults(test_libnfs.LibnfsTestCase):

    def test_server_killed_and_restarted_mid_copy(self):
        srv = self.server()
        be = self.backend(srv)
        data = os.urandom(32 * MiB)
        killed = []

        def crash(offset):
            if offset >= 12 * MiB and not killed:
                killed.append(offset)
                srv.stop(kill=True)
                threading.Timer(1.5, srv.start).start()

        result = copy.stage(be, "img", chunks(data, MiB, hook=crash),
                            len(data), expected_sha512=sha(data),
                            options=options(retries=8))
        self.assertTrue(killed)
        # The copy either rode through libnfs' reconnect (nothing was
        # uncommitted) or rewrote what the crash lost (result.retries).
        self.assertEqual(2, srv.starts)
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual(data, local_bytes(srv, "img"))
        self.assertEqual((len(data), False), copy.status(be, "img"))

    def test_server_down_fails_clearly_then_resumes(self):
        srv = self.server()
        be = self.backend(srv, timeout=2, reconnect_timeout=2)
        data = os.urandom(24 * MiB)
        src = os.path.join(self.useFixture(fixtures.TempDir()).path, "img.raw")
        with open(src, "wb") as f:
            f.write(data)

        def crash(offset):
            if offset == 10 * MiB:
                srv.stop(kill=True)

        started = time.monotonic()
        exc = self.assertRaises(
            backend.StagingError, copy.stage, be, "img",
            chunks(data, MiB, hook=crash), len(data),
            options=options(retries=2, retry_initial=0.1))
        self.assertLess(time.monotonic() - started, 60)
        self.assertIsInstance(exc, backend.Unavailable)
        self.assertIn("img", str(exc))
        srv.start()
        # The server was down when the copy failed, so the watermark could
        # not say "failed"; it still names only committed bytes.
        committed, _ = copy.status(be, "img")
        self.assertLess(committed, len(data))
        # Whatever the watermark claims is really there.
        self.assertEqual(data[:committed],
                         local_bytes(srv, "img")[:committed])
        result = copy.stage(be, "img", blocks.file_source(src), len(data),
                            expected_sha512=sha(data), options=options())
        self.assertEqual(committed, result.start)
        self.assertEqual(len(data) - committed, result.bytes_copied)
        self.assertEqual(data, local_bytes(srv, "img"))

    def test_copy_process_killed_then_resumed(self):
        srv = self.server()
        be = self.backend(srv)
        tmp = self.useFixture(fixtures.TempDir()).path
        src = os.path.join(tmp, "img.raw")
        data = os.urandom(48 * MiB)
        with open(src, "wb") as f:
            f.write(data)
        url = srv.url_for(srv.client_ns)
        script = (
            "import sys, time\n"
            "from dtn_migrate.staging import blocks, copy, copycommon\n"
            "from dtn_migrate.staging import libnfs\n"
            "be = libnfs.LibnfsBackend(sys.argv[1])\n"
            "def slow(offset):\n"
            "    for chunk in blocks._read_chunks(open(sys.argv[2], 'rb'),"
            " offset, 1 << 20):\n"
            "        time.sleep(0.02)\n"
            "        yield chunk\n"
            "copy.stage(be, 'img', slow, %d, options=copycommon.CopyOptions("
            "commit_interval=4 << 20, free_margin=0))\n" % len(data))
        argv = srv.lab.argv(srv.client_ns,
                            [sys.executable, "-c", script, url, src])
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = copy.status(be, "img")
            if state and state[0] >= 16 * MiB:
                break
            self.assertIsNone(proc.poll(), proc.stderr.read()
                              if proc.poll() is not None else "")
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        committed, failed = copy.status(be, "img")
        self.assertGreaterEqual(committed, 16 * MiB)
        self.assertLess(committed, len(data))
        self.assertEqual(data[:committed],
                         local_bytes(srv, "img")[:committed])
        result = copy.stage(be, "img", blocks.file_source(src), len(data),
                            expected_sha512=sha(data), options=options())
        self.assertEqual(committed, result.start)
        self.assertEqual(data, local_bytes(srv, "img"))


class TestExportFaults(test_libnfs.LibnfsTestCase):

    def test_refused_before_copy_when_too_big(self):
        srv = self.server(size=32 * MiB)
        be = self.backend(srv)
        exc = self.assertRaises(backend.NoSpace, copy.stage, be, "img",
                                iter([b"x"]), 64 * MiB, options=options())
        self.assertIn("img", str(exc))
        self.assertIsNone(be.size("img"))

    def test_export_fills_up_mid_copy(self):
        srv = self.server(size=32 * MiB)
        be = self.backend(srv)
        data = os.urandom(20 * MiB)
        filled = []

        def fill(offset):
            # Another image takes the space once this copy has begun.
            if offset >= 6 * MiB and not filled:
                filled.append(offset)
                with be.open_write("other") as w:
                    try:
                        for off in range(0, 30 * MiB, MiB):
                            w.pwrite(b"\1" * MiB, off)
                        w.commit()
                    except backend.NoSpace:
                        pass

        exc = self.assertRaises(
            backend.NoSpace, copy.stage, be, "img",
            chunks(data, MiB, hook=fill), len(data), options=options())
        self.assertIn("img", str(exc))
        committed, failed = copy.status(be, "img")
        self.assertTrue(failed)
        self.assertLess(committed, len(data))
        self.assertEqual(data[:committed],
                         local_bytes(srv, "img")[:committed])
        # Space comes back: the same call resumes and completes.
        be.remove("other")
        result = copy.stage(be, "img", chunks(data, MiB, start=committed),
                            len(data), offset=committed,
                            expected_sha512=sha(data), options=options())
        self.assertEqual(committed, result.start)
        self.assertEqual(data, local_bytes(srv, "img"))

    def test_read_only_export(self):
        srv = self.server(read_only=True)
        be = self.backend(srv)
        exc = self.assertRaises(backend.ReadOnly, copy.stage, be, "img",
                                iter([b"x" * 100]), 100, options=options())
        self.assertIn("img", str(exc))
        self.assertFalse(os.path.exists(srv.local("img")))

    def test_stale_handle_during_remote_copy(self):
        srv = self.server()
        be = self.backend(srv)
        other = self.backend(srv)
        data = os.urandom(16 * MiB)
        copy.stage(be, "img", chunks(data, MiB), len(data),
                   options=options())
        stream = staging_stream.open_staged(
            be, "img", len(data), sha(data),
            options=options(readers=1, queue_depth=1,
                            retries=1))
        got = bytearray()
        it = iter(stream)
        got += next(it)
        # Another client replaces the image behind the reader's handle.
        other.remove("img")
        copy.stage(other, "img", chunks(os.urandom(len(data)), MiB),
                   len(data), options=options())

        def drain():
            for block in it:
                got.extend(block)
        self.assertRaises(backend.StagingError, drain)
        stream.close()
        # Never a complete image from mixed files.
        self.assertLess(len(got), len(data))


class TestPipelineOverNfs(test_libnfs.LibnfsTestCase):
    """Local copy over NFS (1 gbit veth) while the transfer engine sends
    the growing file from the DTN's export, following its watermark.
    """

    def cfg(self):
        return config.TransferConfig(
            object_size=MiB, window_bytes=8 * MiB, sync_bytes=4 * MiB,
            sync_interval=0.05, min_free_bytes=0,
            reconnect_initial_interval=0.05, reconnect_max_interval=0.2,
            connect_timeout=2.0)

    def test_growing_file_follows_watermark(self):
        lab = self.lab("1gbit")
        srv = self.server(lab=lab)
        be = self.backend(srv)
        tmp = self.useFixture(fixtures.TempDir()).path
        dst, state = os.path.join(tmp, "dst"), os.path.join(tmp, "state")
        os.makedirs(dst)
        data = os.urandom(40 * MiB + 777)
        be.open_write("img").close()
        watermark.publish(be, "img", 0)

        # The DTN's agent reads the export directly (it is the server).
        server = sink.SinkServer(dst, self.cfg(), "sink",
                                 lambda p: KEY if p == "source" else None,
                                 host="127.0.0.1")
        server.start()
        self.addCleanup(server.stop)
        spec = dataset.FileSpec(
            name="img", path=srv.local("img"), size=len(data),
            sha512=sha(data), growing=True,
            watermark_file=srv.local("img.watermark"))
        transfer = source.SourceTransfer(
            dataset.Manifest.new("sink", [spec]),
            source.Peer("sink", "127.0.0.1", server.port, KEY), self.cfg(),
            state, "source")
        self.addCleanup(transfer.close)
        sent = {}
        sender = threading.Thread(target=lambda: sent.update(transfer.run()))
        seen = []

        def observe(offset):
            seen.append(transfer.progress.snapshot()["bytes_done"])

        sender.start()
        self.addCleanup(sender.join, 60)
        result = copy.stage(be, "img", chunks(data, 256 * KiB, hook=observe),
                            len(data), expected_sha512=sha(data),
                            options=options(commit_interval=2 * MiB))
        sender.join(60)
        self.assertEqual(sha(data), result.sha512)
        self.assertEqual("complete", sent.get("state"), sent.get("error"))
        with open(os.path.join(dst, "img"), "rb") as f:
            self.assertEqual(data, f.read())
        # The transfer overlapped the staging: bytes were confirmed at the
        # sink before the local copy had read the whole source.
        self.assertTrue(any(0 < s < len(data) for s in seen), seen[-5:])
