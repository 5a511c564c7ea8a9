"""LibnfsBackend against a real nfs-ganesha NFSv3 server.

Each test runs its own ganesha (``devcloud.ganesha``) in a network
namespace; the test thread joins the client's namespace, so libnfs talks
to the server over 127.0.0.1 of that namespace (loopback) or over the
veth of a ``netns.Lab`` from namespace a to b.
"""

import hashlib
import os
import threading
import time

import testtools
from testtools import content

from dtn_migrate.staging import backend
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import nfslib
from devcloud import ganesha
from devcloud import netns

MiB = 1 << 20


def sha512(data):
    return hashlib.sha512(data).hexdigest()


def file_sha512(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MiB), b""):
            h.update(block)
    return h.hexdigest()


def read_all(be, name, chunk=MiB):
    out = bytearray()
    with be.open_read(name) as r:
        while True:
            data = r.pread(chunk, len(out))
            out += data
            if len(data) < chunk:
                return bytes(out)


class LibnfsTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        ok, why = ganesha.available()
        if not ok:
            self.skipTest(why)
        try:
            nfslib.load_library()
        except backend.LibraryMissing as exc:
            self.skipTest(str(exc))

    def server(self, lab=None, **kw):
        """A started ganesha, stopped at cleanup; the test thread is moved
        into the client's namespace until cleanup.
        """
        srv = ganesha.Ganesha(lab=lab, **kw)
        self.addCleanup(srv.close)
        self.addOnException(lambda exc_info: self.addDetail(
            "ganesha.log", content.text_content(
                srv.log_text()[-20000:])))
        srv.start()
        ctx = srv.client()
        ctx.__enter__()
        self.addCleanup(ctx.__exit__, None, None, None)
        return srv

    def backend(self, srv, path="", **kw):
        kw.setdefault("timeout", 5)
        kw.setdefault("reconnect_timeout", 10)
        be = libnfs.LibnfsBackend(srv.url_for(srv.client_ns, path), **kw)
        self.addCleanup(be.close)
        return be

    def lab(self, rate="1gbit"):
        ok, why = netns.available()
        if not ok:
            self.skipTest(why)
        lab = netns.Lab(rate=rate)
        lab.start()
        self.addCleanup(lab.close)
        return lab


class TestReadWrite(LibnfsTestCase):

    def test_write_commit_read_bit_exact(self):
        srv = self.server()
        be = self.backend(srv)
        self.assertEqual(MiB, be.max_io)
        data = os.urandom(5 * MiB + 12345)
        with be.open_write("images/a/img.raw") as w:
            # In-order 1 MiB blocks, then one odd block out of order.
            for off in range(MiB, len(data), MiB):
                w.pwrite(data[off:off + MiB], off)
            w.pwrite(memoryview(data)[:MiB], 0)
            w.commit()
        self.assertEqual(len(data), be.size("images/a/img.raw"))
        self.assertEqual(sha512(data), sha512(read_all(be,
                                                       "images/a/img.raw")))
        self.assertEqual(sha512(data),
                         file_sha512(srv.local("images/a/img.raw")))
        # Reads larger than the file and than one NFS READ.
        with be.open_read("images/a/img.raw") as r:
            self.assertEqual(data, r.pread(len(data) + 4 * MiB, 0))
            self.assertEqual(data[-100:], r.pread(MiB, len(data) - 100))
            self.assertEqual(b"", r.pread(MiB, len(data)))
            buf = bytearray(3 * MiB)
            self.assertEqual(3 * MiB, r.readinto(buf, 7))
            self.assertEqual(data[7:7 + 3 * MiB], bytes(buf))

    def test_large_calls_are_split(self):
        # 64 KiB transfers: one 20 MiB pwrite becomes many parallel RPCs.
        srv = self.server(max_io=64 * 1024)
        be = self.backend(srv)
        self.assertEqual(64 * 1024, be.max_io)
        data = os.urandom(20 * MiB + 3)
        with be.open_write("big.raw", truncate=True) as w:
            w.pwrite(bytearray(data), 0)
            w.commit()
        self.assertEqual(sha512(data), file_sha512(srv.local("big.raw")))
        self.assertEqual(sha512(data), sha512(read_all(be, "big.raw",
                                                       chunk=7 * MiB)))

    def test_sync_writes(self):
        srv = self.server()
        be = self.backend(srv)
        data = os.urandom(3 * MiB + 1)
        with be.open_write("sync.raw", sync=True) as w:
            for off in range(0, len(data), MiB):
                w.pwrite(data[off:off + MiB], off)
                self.assertFalse(w.dirty)   # FILE_SYNC: nothing to commit
            w.commit()
        self.assertEqual(sha512(data), file_sha512(srv.local("sync.raw")))

    def test_server_commit_export(self):
        srv = self.server(commit=True)
        be = self.backend(srv)
        data = os.urandom(2 * MiB)
        with be.open_write("c.raw") as w:
            w.pwrite(data, 0)
            w.commit()
        self.assertEqual(data, read_all(be, "c.raw"))

    def test_truncate_and_overwrite(self):
        srv = self.server()
        be = self.backend(srv)
        be.write_small("w", b"0123456789")
        with be.open_write("w") as w:          # no truncate: overwrite
            w.pwrite(b"ab", 2)
        self.assertEqual(b"01ab456789", be.read_small("w"))
        with be.open_write("w", truncate=True) as w:
            w.pwrite(b"xy", 0)
        self.assertEqual(b"xy", be.read_small("w"))

    def test_threads_share_a_file(self):
        srv = self.server()
        be = self.backend(srv)
        data = os.urandom(8 * MiB)
        errors = []

        def half(start):
            try:
                with be.open_write("shared.raw") as w:
                    for off in range(start, start + 4 * MiB, MiB):
                        w.pwrite(data[off:off + MiB], off)
                    w.commit()
            except Exception as exc:  # noqa: B902 - reported below
                errors.append(exc)

        me = srv.lab.ns(srv.client_ns)
        threads = [threading.Thread(target=ganesha.in_netns,
                                    args=(me, half, s))
                   for s in (0, 4 * MiB)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], errors)
        self.assertEqual(sha512(data), file_sha512(srv.local("shared.raw")))


class TestNames(LibnfsTestCase):

    def test_size_rename_remove_free(self):
        srv = self.server(size=64 * MiB)
        be = self.backend(srv)
        self.assertIsNone(be.size("a"))
        free = be.free_bytes()
        self.assertGreater(free, 60 * MiB)
        self.assertLessEqual(free, 64 * MiB)
        with be.open_write("d1/d2/a") as w:
            w.pwrite(b"x" * MiB, 0)
            w.commit()
        self.assertTrue(os.path.isdir(srv.local("d1", "d2")))
        self.assertEqual(MiB, be.size("d1/d2/a"))
        self.assertLess(be.free_bytes(), free - MiB // 2)
        be.write_small("b", b"old")
        be.rename("d1/d2/a", "b")               # replaces b
        self.assertIsNone(be.size("d1/d2/a"))
        self.assertEqual(MiB, be.size("b"))
        be.remove("b")
        be.remove("b")                          # missing: not an error
        self.assertIsNone(be.size("b"))
        be.mkdir("m/n/o")
        be.mkdir("m/n/o")
        self.assertTrue(os.path.isdir(srv.local("m", "n", "o")))
        self.assertRaises(backend.NotEmpty, be.rmdir, "m/n")
        be.rmdir("m/n/o")
        be.rmdir("m/n/o")                       # missing: not an error
        self.assertEqual([], os.listdir(srv.local("m", "n")))
        self.assertRaises(backend.StagingNotFound, be.open_read, "nothing")
        self.assertRaises(backend.StagingNotFound, be.rename, "nothing", "x")

    def test_hostile_names_refused(self):
        srv = self.server()
        be = self.backend(srv)
        be.write_small("ok", b"1")
        for name in ("../escape", "/etc/passwd", "a/../../b", "", "a//b",
                     "a/./b", "x\0y", "..", "a/", None):
            for op in (lambda n: be.open_write(n),
                       lambda n: be.open_read(n), be.size, be.remove,
                       lambda n: be.rename("ok", n),
                       lambda n: be.rename(n, "ok2"), be.mkdir):
                self.assertRaises(ValueError, op, name)
        self.assertEqual(["ok"], sorted(os.listdir(srv.local())))
        self.assertFalse(os.path.exists(os.path.join(
            os.path.dirname(srv.local()), "escape")))
        self.assertRaises(ValueError, libnfs.LibnfsBackend,
                          srv.url.replace("/export", "/export/../etc"))

    def test_staging_subdirectory(self):
        srv = self.server()
        os.makedirs(srv.local("stage", "in"))
        be = self.backend(srv, path="stage/in")
        self.assertEqual(("/export/stage/in", ""), be._mounted)
        be.write_small("f", b"hello")
        self.assertEqual(b"hello", open(srv.local("stage", "in", "f"),
                                        "rb").read())
        # An explicit export= mounts the export and works below it.
        be2 = libnfs.LibnfsBackend(srv.url_for(
            srv.client_ns, "stage/in", export="/export"), timeout=5)
        self.addCleanup(be2.close)
        self.assertEqual(("/export", "stage/in"), be2._mounted)
        self.assertEqual(b"hello", be2.read_small("f"))
        # The same from (server, export, path).
        host = "127.0.0.1"
        be3 = libnfs.LibnfsBackend(host, "/export", "stage/in",
                                   nfsport=srv.nfsport,
                                   mountport=srv.mountport)
        self.addCleanup(be3.close)
        self.assertEqual(b"hello", be3.read_small("f"))
        err = self.assertRaises(backend.StagingNotFound, self.backend, srv,
                                path="missing")
        self.assertIn("missing", str(err))
        err = self.assertRaises(
            backend.PermissionDenied, libnfs.LibnfsBackend, host,
            "/no-such-export", nfsport=srv.nfsport,
            mountport=srv.mountport)
        self.assertIn("/no-such-export", str(err))


class TestNamespaces(LibnfsTestCase):

    def test_across_veth(self):
        lab = self.lab(rate="1gbit")
        srv = self.server(lab=lab)
        self.assertEqual("a", srv.client_ns)
        self.assertIn("//%s/export?" % lab.addr_b, srv.url)
        be = self.backend(srv)
        data = os.urandom(24 * MiB + 7)
        t0 = time.monotonic()
        with be.open_write("img") as w:
            for off in range(0, len(data), MiB):
                w.pwrite(data[off:off + MiB], off)
            w.commit()
        rate = len(data) / MiB / (time.monotonic() - t0)
        self.addDetail("MiB/s", content.text_content(
            "%.0f" % rate))
        self.assertLess(rate, 140)     # the tbf limit applies: over the veth
        self.assertEqual(sha512(data), file_sha512(srv.local("img")))
        self.assertEqual(sha512(data), sha512(read_all(be, "img")))


class TestFaults(LibnfsTestCase):

    def _copy(self, be, name, data, sync, commit_every, hook=None):
        """Copy ``data`` like the staging engine: commit every
        ``commit_every`` bytes and on Unavailable resume from the last
        commit.  The exceptions seen.
        """
        seen = []
        committed = off = 0
        with be.open_write(name, sync=sync, truncate=True) as w:
            while off < len(data):
                try:
                    w.pwrite(memoryview(data)[off:off + MiB], off)
                    off += MiB
                    if hook:
                        hook(off)
                    if off % commit_every == 0 or off >= len(data):
                        w.commit()
                        committed = off
                except backend.Unavailable as exc:
                    seen.append(exc)
                    self.assertLess(len(seen), 5, seen)
                    off = committed
        return seen

    def _crash_at(self, srv, at, down=1.0):
        """A hook that kills ganesha once ``at`` bytes were written and
        starts it again ``down`` seconds later.
        """
        state = {}

        def hook(off):
            if off == at and not state:
                srv.stop(kill=True)
                state["timer"] = threading.Timer(down, srv.start)
                state["timer"].start()

        def wait():
            state["timer"].join()

        return hook, wait

    def test_kill9_mid_copy_async_resumes(self):
        srv = self.server()
        be = self.backend(srv, reconnect_timeout=30)
        data = os.urandom(24 * MiB)
        hook, wait = self._crash_at(srv, 10 * MiB)
        seen = self._copy(be, "k.raw", data, False, 8 * MiB, hook)
        wait()
        # Unstable writes were outstanding: reported, then redone.
        self.assertEqual([backend.WritesLost], [type(e) for e in seen])
        self.assertIn("write them again", str(seen[0]))
        self.assertEqual(len(data), be.size("k.raw"))
        self.assertEqual(sha512(data), file_sha512(srv.local("k.raw")))

    def test_kill9_mid_copy_sync_rides_through(self):
        srv = self.server()
        be = self.backend(srv, reconnect_timeout=30)
        data = os.urandom(12 * MiB)
        hook, wait = self._crash_at(srv, 5 * MiB)
        seen = self._copy(be, "s.raw", data, True, 4 * MiB, hook)
        wait()
        self.assertEqual([], seen)      # FILE_SYNC writes are retried
        self.assertEqual(sha512(data), file_sha512(srv.local("s.raw")))

    def test_kill9_reader_and_names_ride_through(self):
        srv = self.server()
        be = self.backend(srv, reconnect_timeout=30)
        data = os.urandom(6 * MiB)
        with be.open_write("r.raw") as w:
            w.pwrite(data, 0)
            w.commit()
        out = bytearray()
        with be.open_read("r.raw") as r:
            out += r.pread(2 * MiB, 0)
            srv.stop(kill=True)
            timer = threading.Timer(1.0, srv.start)
            timer.start()
            out += r.pread(4 * MiB, 2 * MiB)
            timer.join()
        self.assertEqual(sha512(data), sha512(bytes(out)))
        srv.restart(kill=True)
        self.assertEqual(len(data), be.size("r.raw"))

    def test_server_down_is_unavailable_not_a_hang(self):
        srv = self.server()
        be = self.backend(srv, timeout=2, reconnect_timeout=2)
        w = be.open_write("d.raw")
        w.pwrite(b"x" * MiB, 0)
        srv.stop(kill=True)
        t0 = time.monotonic()
        err = self.assertRaises(backend.WritesLost, w.pwrite, b"y" * MiB, MiB)
        self.assertIn("d.raw", str(err))
        self.assertIn("127.0.0.1", str(err))
        self.assertRaises(backend.Unavailable, w.pwrite, b"y", 0)
        self.assertRaises(backend.Unavailable, w.commit)
        for op in (lambda: be.size("d.raw"), be.free_bytes,
                   lambda: be.open_write("e"), lambda: be.open_read("d")):
            err = self.assertRaises(backend.Unavailable, op)
            self.assertTrue(err.retryable)
            self.assertIn("nfs://127.0.0.1/export", str(err))
            self.assertIn("no usable connection", str(err))
        t1 = time.monotonic()
        w.close()                       # no hang on a dead connection
        self.assertLess(time.monotonic() - t1, 1.0)
        self.assertLess(t1 - t0, 30)
        srv.start()
        self.assertEqual(MiB, be.size("d.raw"))

    def test_link_blackhole_times_out(self):
        lab = self.lab(rate=None)
        srv = self.server(lab=lab)
        be = self.backend(srv, timeout=2, reconnect_timeout=0)
        with be.open_write("t.raw") as w:
            w.pwrite(b"x" * MiB, 0)
            w.commit()
            w.pwrite(b"y" * MiB, MiB)           # not committed
            # The server's end goes down: packets vanish, nothing answers.
            netns._sh(["ip", "-n", lab.ns_b, "link", "set", lab.dev_b,
                       "down"])
            t0 = time.monotonic()
            err = self.assertRaises(backend.WritesLost, w.pwrite,
                                    b"z" * MiB, 2 * MiB)
            took = time.monotonic() - t0
            self.assertIn("no usable connection", str(err))
            self.assertGreater(took, 1.5)
            self.assertLess(took, 10)
            # A name operation: the connect gives up after its SYNs.
            t0 = time.monotonic()
            err = self.assertRaises(backend.ConnectionLost, be.size, "t.raw")
            self.assertLess(time.monotonic() - t0, 10)
            lab.link_up()
            be.reconnect_timeout = 10
            w.pwrite(b"y" * MiB, MiB)           # reconnects by itself
            w.pwrite(b"z" * MiB, 2 * MiB)
            w.commit()
        self.assertEqual(3 * MiB, be.size("t.raw"))

    def test_export_full_is_nospace(self):
        srv = self.server(size=8 * MiB)
        be = self.backend(srv)
        self.assertLessEqual(be.free_bytes(), 8 * MiB)
        for sync in (False, True):
            w = be.open_write("full-%s" % sync, sync=sync)
            self.addCleanup(w.close)

            def fill():
                for off in range(0, 16 * MiB, 2 * MiB):
                    w.pwrite(b"z" * 2 * MiB, off)
                w.commit()

            err = self.assertRaises(backend.NoSpace, fill)
            self.assertFalse(err.retryable)
            self.assertIn("NFS3ERR_NOSPC", str(err))
            self.assertIn("export is full", str(err))
            self.assertIn("full-%s" % sync, str(err))
            w.close()
            be.remove("full-%s" % sync)

    def test_read_only_export(self):
        srv = self.server(read_only=True)
        with open(srv.local("present"), "wb") as f:
            f.write(b"data")
        be = self.backend(srv)
        self.assertEqual(b"data", be.read_small("present"))
        for op in (lambda: be.open_write("new"),
                   lambda: be.open_write("present"),
                   lambda: be.open_write("sub/new"),
                   lambda: be.remove("present"),
                   lambda: be.rename("present", "other"),
                   lambda: be.mkdir("d"),
                   lambda: be.write_small("marker", b"1")):
            err = self.assertRaises(backend.ReadOnly, op)
            self.assertIn("read-only", str(err))
        self.assertEqual(["present"], os.listdir(srv.local()))

    def test_stale_handle_after_remove_elsewhere(self):
        srv = self.server()
        be = self.backend(srv)
        other = self.backend(srv)
        w = be.open_write("st.raw")
        self.addCleanup(w.close)
        w.pwrite(b"a" * 1000, 0)
        w.commit()
        r = be.open_read("st.raw")
        self.addCleanup(r.close)
        other.remove("st.raw")          # another client removes it
        err = self.assertRaises(backend.StaleHandle, w.pwrite, b"b", 0)
        self.assertIn("NFS3ERR_STALE", str(err))
        self.assertTrue(err.retryable)
        err = self.assertRaises(backend.StaleHandle, r.pread, 10, 0)
        self.assertIn("NFS3ERR_STALE", str(err))
        w.reopen()                      # a new file under the same name
        w.pwrite(b"new", 0)
        w.commit()
        self.assertEqual(b"new", other.read_small("st.raw"))

    def test_stale_handle_after_new_export(self):
        srv = self.server(size=32 * MiB)
        be = self.backend(srv)
        be.write_small("v.raw", b"version 1")
        r = be.open_read("v.raw")
        self.addCleanup(r.close)
        self.assertEqual(b"version 1", r.pread(100, 0))
        srv.restart(new_export=True)    # a fresh, empty filesystem
        err = self.assertRaises(backend.StaleHandle, r.pread, 100, 0)
        self.assertIn("removed", str(err))
        be.write_small("v.raw", b"version 2")
        err = self.assertRaises(backend.StaleHandle, r.pread, 100, 0)
        self.assertIn("replaced", str(err))
        r.reopen()
        self.assertEqual(b"version 2", r.pread(100, 0))

    def test_staging_directory_replaced_remounts(self):
        srv = self.server()
        os.makedirs(srv.local("stage"))
        be = self.backend(srv, path="stage")
        be.write_small("one", b"1")
        other = self.backend(srv)
        # Another client replaces the staging directory: the handle the
        # backend mounted is stale now; it mounts again by itself.
        other.remove("stage/one")
        other.rmdir("stage")
        other.mkdir("stage")
        self.assertIsNone(be.size("one"))
        be.write_small("two", b"2")
        self.assertEqual(b"2", other.read_small("stage/two"))

    def test_restart_between_calls(self):
        # The server restarts while the client is idle; libnfs re-makes the
        # connection inside the next call.  Unstable writes before the
        # restart are reported; FILE_SYNC and committed ones are not.
        srv = self.server()
        be = self.backend(srv)
        w = be.open_write("a.raw")
        self.addCleanup(w.close)
        s = be.open_write("s.raw", sync=True)
        self.addCleanup(s.close)
        c = be.open_write("c.raw")
        self.addCleanup(c.close)
        for f in (w, s, c):
            f.pwrite(b"1" * MiB, 0)
        c.commit()
        srv.restart(kill=True)
        err = self.assertRaises(backend.WritesLost, w.pwrite, b"2" * MiB, MiB)
        self.assertIn("re-made", str(err))
        w.pwrite(b"1" * MiB, 0)                # the caller redoes them
        w.pwrite(b"2" * MiB, MiB)
        w.commit()
        s.pwrite(b"2" * MiB, MiB)
        c.pwrite(b"2" * MiB, MiB)
        c.commit()
        for name in ("a.raw", "s.raw", "c.raw"):
            with open(srv.local(name), "rb") as f:
                self.assertEqual(b"1" * MiB + b"2" * MiB, f.read())
