"""Source and sink together, in one process, over loopback TCP.

These exercise the engine's protocol paths quickly; the functional tests
repeat the important ones with agents in separate processes.
"""

import errno
import hashlib
import os
import shutil
import socket
import tempfile
import threading
import time

import fixtures

from dtn_migrate.transfer import config
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.sink import session as sinksession
from dtn_migrate.transfer.source import transfer as source
from tests.unit import utils as test_utils
from tests.unit import testcase
from devcloud import relay

KEY = b"k" * 32
MiB = 1 << 20


def write_file(path, size, seed):
    """Deterministic content, different in every 64 KiB."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    block = hashlib.sha512(b"%d" % seed).digest() * 1024
    with open(path, "wb") as f:
        n = 0
        while n < size:
            chunk = (b"%016d" % n) + block[16:]
            chunk = chunk[:min(len(chunk), size - n)]
            f.write(chunk)
            n += len(chunk)


def sha512(path):
    with open(path, "rb") as f:
        return hashlib.sha512(f.read()).hexdigest()


class EngineTestCase(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="dtnm-engine-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.src = os.path.join(self.tmp, "src")
        self.dst = os.path.join(self.tmp, "dst")
        self.state = os.path.join(self.tmp, "state")
        os.makedirs(self.src)

    def cfg(self, **kw):
        kw.setdefault("object_size", 256 << 10)
        kw.setdefault("window_bytes", 4 * MiB)
        kw.setdefault("sync_bytes", 1 * MiB)
        kw.setdefault("sync_interval", 0.01)
        kw.setdefault("min_free_bytes", 0)
        kw.setdefault("reconnect_initial_interval", 0.05)
        kw.setdefault("reconnect_max_interval", 0.2)
        kw.setdefault("connect_timeout", 2.0)
        return config.TransferConfig(**kw)

    def start_sink(self, cfg=None, key=KEY, **kw):
        server = sink.SinkServer(self.dst, cfg or self.cfg(), "sink",
                                 lambda peer: key if peer == "source"
                                 else None, host="127.0.0.1", **kw)
        server.start()
        self.addCleanup(server.stop)
        return server

    def transfer(self, port, files, cfg=None, key=KEY, transfer_id=None,
                 hashes=None):
        specs = dataset.expand(self.src, files, hashes)
        manifest = dataset.Manifest.new("sink", specs,
                                        transfer_id=transfer_id)
        peer = source.Peer("sink", "127.0.0.1", port, key)
        t = source.SourceTransfer(manifest, peer, cfg or self.cfg(),
                                  self.state, "source")
        self.addCleanup(t.close)
        return t

    def run_transfer(self, t, timeout=60):
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        th.join(timeout)
        if th.is_alive():
            t.cancel()
            th.join(10)
            self.fail("transfer did not finish in %d s: %s"
                      % (timeout, t.status()))
        return result

    def assertSameFile(self, name):
        self.assertEqual(sha512(os.path.join(self.src, name)),
                         sha512(os.path.join(self.dst, name)))


class TestTransfers(EngineTestCase):
    def test_files_of_every_shape(self):
        sizes = {"empty": 0, "tiny": 1, "exact": 1 * MiB,
                 "odd": 3 * MiB + 12345, "dir/nested/file": 300000,
                 "sp ace, ünïcode": 70000}
        for i, (name, size) in enumerate(sizes.items()):
            write_file(os.path.join(self.src, name), size, i)
        server = self.start_sink()
        t = self.transfer(server.port, list(sizes))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(len(sizes), status["files_done"])
        self.assertEqual(sum(sizes.values()), status["bytes_done"])
        for name in sizes:
            self.assertSameFile(name)
        incoming = server.status(t.transfer_id)
        self.assertEqual(len(sizes), incoming["files_done"])
        self.assertEqual(0, incoming["objects_corrupt"])
        # Nothing is left in the partial area, and the log is gone.
        self.assertEqual([], os.listdir(os.path.join(self.dst,
                                                     ".dtn-partial")))
        self.assertFalse(os.path.exists(os.path.join(
            self.state, t.transfer_id, "log")))
        # Every file's sha512 is reported, as the sink verified it.
        for f in status["files"]:
            self.assertEqual(sha512(os.path.join(self.src, f["name"])),
                             f["sha512"])

    def test_new_name_is_published_when_installed(self):
        # Readers following the partial copy find its final name as
        # soon as it is renamed, not only once the rename is durable.
        write_file(os.path.join(self.src, "f"), 1 * MiB + 5, 1)
        release = threading.Event()
        self.addCleanup(release.set)
        confirm = sinksession.SinkSession._confirm_installed

        def slow_confirm(session, batch, dirs_durable=False):
            if batch:
                release.wait(30)
            return confirm(session, batch, dirs_durable)
        self.patch(sinksession.SinkSession, "_confirm_installed", slow_confirm)
        server = self.start_sink()
        t = self.transfer(server.port, ["f"])
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        final = os.path.join(self.dst, "f")
        test_utils.wait_until(
            lambda: (server.watermark(t.transfer_id, "f") or {}).get(
                "path") == final, 20, interval=0.01)
        info = server.watermark(t.transfer_id, "f")
        self.assertEqual(final, info and info.get("path"), info)
        self.assertNotEqual("done", info["state"])
        self.assertEqual(1 * MiB + 5, info["durable"])
        self.assertTrue(os.path.isfile(final))
        release.set()
        th.join(30)
        self.assertEqual("complete", result["state"], result.get("error"))
        self.assertEqual("done", server.watermark(t.transfer_id,
                                                  "f")["state"])

    def test_known_hash_and_no_hash_modes(self):
        write_file(os.path.join(self.src, "a"), 2 * MiB + 5, 1)
        write_file(os.path.join(self.src, "b"), 1 * MiB, 2)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"],
                          hashes={"a": sha512(os.path.join(self.src, "a"))})
        self.assertEqual("complete", self.run_transfer(t)["state"])
        t2 = self.transfer(server.port, ["b"],
                           cfg=self.cfg(verify_sha512=False))
        status = self.run_transfer(t2)
        self.assertEqual("complete", status["state"])
        self.assertSameFile("a")
        self.assertSameFile("b")

    def test_second_transfer_skips_files_already_there(self):
        write_file(os.path.join(self.src, "a"), 2 * MiB, 1)
        server = self.start_sink()
        self.assertEqual("complete", self.run_transfer(
            self.transfer(server.port, ["a"]))["state"])
        t = self.transfer(server.port, ["a"])
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"])
        self.assertEqual(0, status["bytes_sent"])
        self.assertEqual(0, server.status(t.transfer_id)["bytes_received"])

    def test_wrong_source_hash_fails_the_file_only(self):
        write_file(os.path.join(self.src, "good"), 1 * MiB, 1)
        write_file(os.path.join(self.src, "bad"), 1 * MiB, 2)
        server = self.start_sink()
        t = self.transfer(server.port, ["good", "bad"],
                          cfg=self.cfg(max_file_retries=1),
                          hashes={"bad": "00" * 64})
        status = self.run_transfer(t)
        self.assertEqual("failed", status["state"])
        self.assertEqual(1, status["files_done"])
        self.assertEqual(1, status["files_failed"])
        self.assertIn("sha512", status["error"])
        self.assertSameFile("good")
        self.assertFalse(os.path.exists(os.path.join(self.dst, "bad")))

    def test_hostile_names_are_refused_without_writes(self):
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        write_file(os.path.join(self.src, "ok"), 1000, 1)
        os.makedirs(self.dst)
        os.symlink(outside, os.path.join(self.dst, "link"))
        server = self.start_sink()
        specs = dataset.expand(self.src, ["ok"])
        for bad in ("../escape", "/etc/passwd", "a/../../x", "link/x",
                    ".dtn-partial/x"):
            specs.append(dataset.FileSpec(name=bad, path=specs[0].path,
                                          size=1000))
        manifest = dataset.Manifest.new("sink", specs)
        t = source.SourceTransfer(manifest, source.Peer(
            "sink", "127.0.0.1", server.port, KEY), self.cfg(), self.state,
            "source")
        self.addCleanup(t.close)
        status = self.run_transfer(t)
        self.assertEqual(1, status["files_done"])
        self.assertEqual(5, status["files_failed"])
        self.assertEqual([], os.listdir(outside))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "escape")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")))
        failed = [f for f in status["files"] if f["state"] == "failed"]
        for f in failed:
            self.assertIn("refused", f["error"])

    def test_no_space_is_refused_clearly(self):
        write_file(os.path.join(self.src, "big"), 2 * MiB, 1)
        server = self.start_sink(self.cfg(min_free_bytes=1 << 60))
        status = self.run_transfer(self.transfer(server.port, ["big"]))
        self.assertEqual("failed", status["state"])
        self.assertIn("not enough space", status["error"])

    def test_wrong_key_fails_fast_and_writes_nothing(self):
        write_file(os.path.join(self.src, "a"), 1 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"], key=b"x" * 32)
        status = self.run_transfer(t, timeout=20)
        self.assertEqual("failed", status["state"])
        self.assertIn("shared key", status["error"])
        self.assertFalse(os.path.exists(os.path.join(self.dst, "a")))
        self.assertEqual([], server.status())


class TestFaults(EngineTestCase):
    def test_link_cut_mid_transfer_resumes(self):
        write_file(os.path.join(self.src, "a"), 24 * MiB, 1)
        server = self.start_sink()
        r = relay.Relay(("127.0.0.1", server.port))
        self.addCleanup(r.close)
        cfg = self.cfg(rate_limit=16 * MiB)
        t = self.transfer(r.port, ["a"], cfg=cfg)
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        while t.progress.snapshot()["percent"] < 40:
            time.sleep(0.02)
        r.cut(down_for=0.5)
        th.join(60)
        self.assertEqual("complete", result["state"], result.get("error"))
        self.assertGreaterEqual(result["attempts"], 2)
        self.assertLessEqual(result["bytes_resent"], cfg.window_bytes)
        self.assertSameFile("a")

    def test_corrupted_object_is_resent(self):
        write_file(os.path.join(self.src, "a"), 16 * MiB, 1)
        server = self.start_sink()
        r = relay.Relay(("127.0.0.1", server.port))
        self.addCleanup(r.close)
        r.corrupt_once(2 * MiB + 777)
        t = self.transfer(r.port, ["a"], cfg=self.cfg(streams=1))
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(1, r.corrupted)
        self.assertEqual(1, server.status(t.transfer_id)["objects_corrupt"])
        self.assertEqual(1, status["objects_resent"])
        self.assertSameFile("a")

    def _cancel_at_half(self, server):
        """Start a 24 MiB transfer, cancel it half way; return it and the
        bytes its object log holds.
        """
        write_file(os.path.join(self.src, "a"), 16 * MiB, 1)
        write_file(os.path.join(self.src, "b"), 8 * MiB, 2)
        t = self.transfer(server.port, ["a", "b"],
                          cfg=self.cfg(rate_limit=16 * MiB))
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        test_utils.wait_until(
            lambda: t.progress.snapshot()["percent"] >= 50, 30,
            interval=0.02)
        t.cancel()
        th.join(30)
        self.assertEqual("cancelled", result["state"])
        t.close()
        return t, result["bytes_done"]

    def _resume(self, t, port, cfg=None):
        # A new process would build the transfer from the saved manifest.
        manifest = dataset.Manifest.load(os.path.join(self.state,
                                                      t.transfer_id))
        t2 = source.SourceTransfer(manifest, source.Peer(
            "sink", "127.0.0.1", port, KEY), cfg or self.cfg(), self.state,
            "source")
        self.addCleanup(t2.close)
        return t2

    def assertSentOnlyMissing(self, done_before, status):
        """Every object the log lacked went out, and none it held: what
        went out twice in this process (an attempt that failed, a NACK)
        is counted apart, in bytes_resent.
        """
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(24 * MiB - done_before,
                         status["bytes_sent"] - status["bytes_resent"],
                         status)
        self.assertSameFile("a")
        self.assertSameFile("b")

    def test_cancel_then_resume_sends_only_missing_objects(self):
        server = self.start_sink()
        t, done_before = self._cancel_at_half(server)
        t2 = self._resume(t, server.port)
        self.assertEqual(done_before, t2.resumed_bytes)
        self.assertSentOnlyMissing(done_before, self.run_transfer(t2))

    def test_resume_cut_again_still_sends_nothing_logged(self):
        # The resumed run loses its link as well: its second attempt
        # resends what was in flight, and still nothing the log held
        # before the cancel.
        server = self.start_sink()
        t, done_before = self._cancel_at_half(server)
        r = relay.Relay(("127.0.0.1", server.port))
        self.addCleanup(r.close)
        t2 = self._resume(t, r.port, self.cfg(rate_limit=8 * MiB))
        self.assertEqual(done_before, t2.resumed_bytes)
        result = {}
        th = threading.Thread(target=lambda: result.update(t2.run()))
        th.start()
        test_utils.wait_until(
            lambda: t2.progress.snapshot()["bytes_sent"] >= 2 * MiB, 30,
            interval=0.01)
        r.cut(down_for=0.2)
        th.join(60)
        self.assertLessEqual(2, result["attempts"], result)
        self.assertSentOnlyMissing(done_before, result)

    def test_growing_file_follows_its_watermark(self):
        path = os.path.join(self.src, "grow")
        size = 6 * MiB + 100
        wm = path + ".wm"
        write_file(path + ".full", size, 3)
        open(path, "wb").close()
        dataset.write_watermark_file(wm, 0)
        server = self.start_sink()
        spec = dataset.FileSpec(name="grow", path=path, size=size,
                                growing=True, watermark_file=wm)
        manifest = dataset.Manifest.new("sink", [spec])
        t = source.SourceTransfer(manifest, source.Peer(
            "sink", "127.0.0.1", server.port, KEY), self.cfg(), self.state,
            "source")
        self.addCleanup(t.close)
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        prefixes = []
        with open(path + ".full", "rb") as src, open(path, "r+b") as dst:
            written = 0
            while written < size:
                chunk = src.read(700000)
                dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
                written += len(chunk)
                dataset.write_watermark_file(wm, written)
                time.sleep(0.05)
                info = server.watermark(t.transfer_id, "grow")
                if info:
                    prefixes.append(info["durable"])
        th.join(60)
        self.assertEqual("complete", result["state"], result.get("error"))
        self.assertEqual(sha512(path + ".full"),
                         sha512(os.path.join(self.dst, "grow")))
        # The sink's durable prefix grew while the writer was writing.
        self.assertTrue(any(0 < p < size for p in prefixes), prefixes)
        self.assertEqual(sorted(prefixes), prefixes)

    def test_growing_file_writer_failure_fails_the_file(self):
        path = os.path.join(self.src, "grow")
        open(path, "wb").close()
        wm = path + ".wm"
        dataset.write_watermark_file(wm, 0, failed=True)
        server = self.start_sink()
        spec = dataset.FileSpec(name="grow", path=path, size=1 * MiB,
                                growing=True, watermark_file=wm)
        t = source.SourceTransfer(
            dataset.Manifest.new("sink", [spec]),
            source.Peer("sink", "127.0.0.1", server.port, KEY),
            self.cfg(), self.state, "source")
        self.addCleanup(t.close)
        status = self.run_transfer(t, timeout=20)
        self.assertEqual("failed", status["state"])
        self.assertIn("reported failure", status["error"])

    def test_unreachable_peer_gives_up_after_deadline(self):
        write_file(os.path.join(self.src, "a"), 1000, 1)
        t = self.transfer(1, ["a"], cfg=self.cfg(reconnect_deadline=1.0))
        status = self.run_transfer(t, timeout=20)
        self.assertEqual("failed", status["state"])
        self.assertIn("unreachable", status["error"])
        self.assertGreaterEqual(status["attempts"], 2)


class _FailingAccepts:
    """A listening socket whose next ``failures`` accept() calls fail
    with EMFILE.
    """

    def __init__(self, sock, failures):
        self.sock = sock
        self.failures = failures
        self.calls = 0

    def accept(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return self.sock.accept()

    def __getattr__(self, name):
        return getattr(self.sock, name)


class TestSinkIsolation(EngineTestCase):
    def test_other_transfers_survive_a_bad_connection(self):
        write_file(os.path.join(self.src, "a"), 8 * MiB, 1)
        server = self.start_sink()
        t = self.transfer(server.port, ["a"], cfg=self.cfg(
            rate_limit=16 * MiB))
        result = {}
        th = threading.Thread(target=lambda: result.update(t.run()))
        th.start()
        for junk in (os.urandom(4096), b"DTNM" + os.urandom(60), b"DT"):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(junk)
            s.close()
        th.join(60)
        self.assertEqual("complete", result["state"], result.get("error"))
        self.assertEqual(1, result["attempts"])
        self.assertSameFile("a")

    def test_a_listener_closed_under_the_sink_ends_its_accept_loop(self):
        # Not through stop(): accept() then fails for ever, and the loop
        # used to try again every 0.05 s for the life of the process.
        log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.transfer.sink"))
        server = self.start_sink()
        accept = [t for t in server._threads if t.name == "sink-accept"]
        self.assertEqual(1, len(accept))
        server._sock.shutdown(socket.SHUT_RDWR)
        server._sock.close()
        accept[0].join(5)
        self.assertFalse(accept[0].is_alive())
        self.assertIn("its listening socket is gone", log.output)

    def test_accept_failures_are_logged_waited_out_and_mended(self):
        # Out of descriptors: accept() fails until some are closed.  The
        # loop used to try again every 0.05 s for ever without a word.
        log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.transfer"))
        write_file(os.path.join(self.src, "a"), 1 * MiB, 1)
        server = self.start_sink()
        listener = _FailingAccepts(server._sock, 3)
        server._sock = listener
        # The loop sits in the real socket's accept(): one connection
        # brings it round to the failing one.
        socket.create_connection(("127.0.0.1", server.port)).close()
        status = self.run_transfer(self.transfer(server.port, ["a"]))
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("a")
        self.assertGreater(listener.calls, 3)     # and then it accepted
        self.assertEqual(1, log.output.count(
            "cannot accept connections: [Errno 24]"), log.output)
        self.assertIn("accepting connections again after 3 failures",
                      log.output)

    def test_accept_failures_that_come_back_are_a_run_of_their_own(self):
        # The fault again after the sink mended: warned of and waited out
        # again, from the shortest wait.
        log = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.transfer"))
        server = self.start_sink()
        listener = _FailingAccepts(server._sock, 3)
        server._sock = listener
        socket.create_connection(("127.0.0.1", server.port)).close()
        for name in ("a", "b"):
            write_file(os.path.join(self.src, name), 1 * MiB, 1)
            status = self.run_transfer(self.transfer(server.port, [name]))
            self.assertEqual("complete", status["state"], status["error"])
            self.assertSameFile(name)
            # The loop waits in the real accept() (counted): the next
            # three after it fail.
            listener.failures = listener.calls + 3
        self.assertEqual(2, log.output.count(
            "cannot accept connections: [Errno 24]"), log.output)
        self.assertEqual(2, log.output.count(
            "accepting connections again after 3 failures"), log.output)

    def test_errors_name_the_problem(self):
        self.assertEqual(errors.Code.NO_SPACE, errors.NoSpaceError("x").code)


class TestVerifyModes(EngineTestCase):
    def test_no_verify_wins_over_a_known_hash(self):
        write_file(os.path.join(self.src, "a"), 1 * MiB, 1)
        server = self.start_sink()
        # A wrong known hash would fail the file if it were verified.
        t = self.transfer(server.port, ["a"],
                          cfg=self.cfg(verify_sha512=False),
                          hashes={"a": "00" * 64})
        status = self.run_transfer(t)
        self.assertEqual("complete", status["state"], status["error"])
        self.assertSameFile("a")


class TestManyCorruptObjects(EngineTestCase):
    """NACKs give their window back: a 1 MiB window of 256 KiB objects
    used to fill up for good after four damaged objects.
    """

    def cfg(self, **kw):
        kw.setdefault("window_bytes", 1 * MiB)
        kw.setdefault("streams", 1)
        return super().cfg(**kw)

    def through_relay(self, size, every, count, cfg):
        write_file(os.path.join(self.src, "a"), size, 7)
        server = self.start_sink()
        r = relay.Relay(("127.0.0.1", server.port))
        self.addCleanup(r.close)
        # Past the handshake, one byte of every object copy (almost all
        # of them in object bytes, so the sink asks for a resend).
        r.corrupt_many(every, count)
        t = self.transfer(r.port, ["a"], cfg=cfg)
        return r, server, t, self.run_transfer(t, timeout=90)

    def test_a_hundred_damaged_objects_in_one_attempt(self):
        r, server, t, status = self.through_relay(
            32 * MiB, (256 << 10) + 4099, 100,
            self.cfg(max_object_retries=100))
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(100, r.corrupted)
        # A flip that hits a frame header costs a connection instead.
        self.assertGreaterEqual(status["objects_corrupt"], 90)
        self.assertEqual(status["objects_corrupt"], status["objects_resent"])
        self.assertSameFile("a")

    def test_every_object_damaged_for_a_while(self):
        # Several flips per object copy: every copy sent during the fault
        # is damaged, objects are resent many times over.
        r, server, t, status = self.through_relay(
            8 * MiB, 64 << 10, 300, self.cfg(max_object_retries=1000))
        self.assertEqual("complete", status["state"], status["error"])
        self.assertEqual(300, r.corrupted)
        self.assertGreaterEqual(status["objects_corrupt"], 60)
        self.assertSameFile("a")

    def test_endless_damage_fails_clearly(self):
        r, server, t, status = self.through_relay(
            8 * MiB, 64 << 10, 10 ** 9, self.cfg(max_object_retries=3))
        self.assertEqual("failed", status["state"])
        self.assertIn("failed its checksum 4 times", status["error"])
        self.assertFalse(os.path.exists(os.path.join(self.dst, "a")))


class TestBackOff(EngineTestCase):
    def test_back_off_doubles_up_to_its_maximum_and_cancels(self):
        write_file(os.path.join(self.src, "a"), 1000, 1)
        t = self.transfer(1, ["a"], cfg=self.cfg(
            reconnect_initial_interval=0.05, reconnect_max_interval=0.2))
        self.patch(source.random, "uniform", lambda a, b: 1.0)
        delays = []
        real_sleep = t._sleep

        def sleep(seconds):
            delays.append(round(seconds, 3))
            if len(delays) == 5:
                t.cancel()
            real_sleep(seconds)
        t._sleep = sleep
        status = self.run_transfer(t, timeout=20)
        self.assertEqual("cancelled", status["state"])
        self.assertEqual([0.05, 0.1, 0.2, 0.2, 0.2], delays)
        self.assertEqual(5, status["attempts"])
