"""Unit tests of dtn_migrate.staging.libnfs that need no NFS server."""

import ctypes
import errno
import time


from dtn_migrate.staging import backend
from dtn_migrate.staging import libnfs
from dtn_migrate.staging import nfslib

from tests.unit import testcase

MiB = 1 << 20


def _library_or_skip(test):
    try:
        return nfslib.load_library()
    except backend.LibraryMissing as exc:
        test.skipTest(str(exc))


class ParseUrlTest(testcase.TestCase):

    def test_operator_url(self):
        self.assertEqual(
            {"server": "192.0.2.2", "export": "/export/staging", "path": "",
             "nfsport": 2049, "mountport": 20048},
            libnfs.parse_url("nfs://192.0.2.2/export/staging?nfsport=2049"
                             "&mountport=20048"))

    def test_all_arguments(self):
        kw = libnfs.parse_url(
            "nfs://dtn1.example.org/srv/nfs/stage/in?export=/srv/nfs&"
            "version=3&uid=1000&gid=100&timeout=2.5&reconnect_timeout=0")
        self.assertEqual({"server": "dtn1.example.org",
                          "export": "/srv/nfs", "path": "stage/in",
                          "version": 3, "uid": 1000, "gid": 100,
                          "timeout": 2.5, "reconnect_timeout": 0.0}, kw)

    def test_normalises_path(self):
        kw = libnfs.parse_url("nfs://h//export///a/?")
        self.assertEqual(("/export/a", ""), (kw["export"], kw["path"]))
        kw = libnfs.parse_url("nfs://h/ex%20port/%C3%BC")
        self.assertEqual("/ex port/\u00fc", kw["export"])
        kw = libnfs.parse_url("nfs://h/export/a?export=/export/a")
        self.assertEqual(("/export/a", ""), (kw["export"], kw["path"]))
        kw = libnfs.parse_url("nfs://h/?")
        self.assertEqual("/", kw["export"])

    def test_port_and_ipv6(self):
        kw = libnfs.parse_url("nfs://[2001:db8::2]:2050/export")
        self.assertEqual("2001:db8::2", kw["server"])
        self.assertEqual(2050, kw["nfsport"])
        kw = libnfs.parse_url("nfs://h:2049/e?nfsport=2049")
        self.assertEqual(2049, kw["nfsport"])

    def test_refused(self):
        for url in ("http://h/export", "nfs:///export", "nfs://h",
                    "nfs://h/export#frag", "nfs://user@h/export",
                    "nfs://h/../etc", "nfs://h/export/./x",
                    "nfs://h/export?colour=blue",
                    "nfs://h/export?nfsport=1&nfsport=2",
                    "nfs://h/export?nfsport=x",
                    "nfs://h/export?nfsport=-1",
                    "nfs://h/export?nfsport=70000",
                    "nfs://h/export?timeout=nan",
                    "nfs://h/export?export=/other",
                    "nfs://h/export?export=/exp",
                    "nfs://h/export?export=relative",
                    "nfs://h:2049/export?nfsport=2050",
                    "nfs://h:x/export", "nfs://h/ex%00port", None, 42):
            self.assertRaises(ValueError, libnfs.parse_url, url)

    def test_message_names_the_problem(self):
        err = self.assertRaises(ValueError, libnfs.parse_url,
                                "nfs://h/e?nfs_port=2049")
        self.assertIn("nfs_port", str(err))
        self.assertIn("nfsport", str(err))


class ErrorMappingTest(testcase.TestCase):

    def error(self, ret, raw, what="write img on nfs://h/e"):
        return nfslib.make_error(ret, raw, what)

    def test_mangled_pwrite_status(self):
        # libnfs 4.0 prints the WRITE3res as a string: its nfsstat3.
        cases = {
            b"\x1c": (backend.NoSpace, "NFS3ERR_NOSPC", "export is full"),
            b"E": (backend.NoSpace, "NFS3ERR_DQUOT", "quota"),
            b"\x1e": (backend.ReadOnly, "NFS3ERR_ROFS", "read-only"),
            b"F": (backend.StaleHandle, "NFS3ERR_STALE", "stale"),
            b"\x11'": (backend.StaleHandle, "NFS3ERR_BADHANDLE", "stale"),
            b"\r": (backend.PermissionDenied, "NFS3ERR_ACCES", ""),
            b"\x18'": (backend.Unavailable, "NFS3ERR_JUKEBOX", "later"),
            b"\x1b": (backend.NoSpace, "NFS3ERR_FBIG", "too large"),
        }
        for raw, (cls, name, hint) in cases.items():
            for call in (b"pwrite", b"pread"):
                err = self.error(-errno.EFAULT,
                                 call + b' call failed with "' + raw + b'"')
                self.assertIs(cls, type(err), raw)
                self.assertIn(name, str(err))
                self.assertIn(hint, str(err))
                self.assertIn("write img on nfs://h/e", str(err))
                self.assertNotIsInstance(err, backend.ConnectionLost)

    def test_status_of_another_rpc_is_ambiguous(self):
        err = self.error(-errno.EFAULT, b'pwrite call failed with ""')
        self.assertIsInstance(err, backend.AmbiguousStatus)
        self.assertFalse(err.retryable)

    def test_named_status(self):
        cases = [
            (-errno.ENOENT, b'open call failed with "NFS: Lookup of /x '
             b'failed with NFS3ERR_NOENT(-2)"', backend.StagingNotFound),
            (-errno.EROFS, b'creat call failed with "NFS: CREATE of /x '
             b'failed with NFS3ERR_ROFS(-30)"', backend.ReadOnly),
            (-errno.ERANGE, b'creat call failed with "NFS: CREATE of /x '
             b'failed with NFS3ERR_DQUOT(-34)"', backend.NoSpace),
            (-errno.EACCES, b'mount_cb: RPC error: Mount failed with error '
             b'MNT3ERR_ACCES(13) Permission denied(13)',
             backend.PermissionDenied),
            (-1, b'NFS: SETATTR failed with NFS3ERR_PERM(-1)',
             backend.PermissionDenied),
            (-errno.ESTALE, b'fsync call failed with "NFS: Commit failed '
             b'with NFS3ERR_STALE(-116)"', backend.StaleHandle),
            (-errno.EIO, b'NFS: Commit failed with NFS3ERR_IO(-5)',
             backend.Unavailable),
            (-errno.EEXIST, b'mkdir call failed with "NFS: MKDIR of /d '
             b'failed with NFS3ERR_EXIST(-17)"', backend.StagingError),
        ]
        for ret, raw, cls in cases:
            err = self.error(ret, raw)
            self.assertIs(cls, type(err), raw)
            self.assertNotIsInstance(err, backend.ConnectionLost)
            self.assertIn(raw.decode(), str(err))

    def test_rpc_failures_are_lost_connections(self):
        cases = [
            (-errno.EIO, b"nfs_service failed"),
            (-errno.EINTR, b'pwrite call failed with "Command was '
             b'cancelled"'),
            (-errno.EINTR, b"command timed out"),
            (-errno.EFAULT, b'pread call failed with "RPC ERROR: All '
             b'attempts to reconnect failed."'),
            (-errno.EFAULT, b'pwrite call failed with "(null)"'),
            (-1, b"nfs_mount_async failed. Failed to start connection. "
             b"connect() to server failed. Network is unreachable(101)"),
            (-errno.ECONNREFUSED, b""),
        ]
        for ret, raw in cases:
            err = self.error(ret, raw)
            self.assertIsInstance(err, backend.ConnectionLost, raw)
            self.assertIsInstance(err, backend.Unavailable)
            self.assertTrue(err.retryable)
            self.assertIn("no usable connection", str(err))
            self.assertIn("write img on nfs://h/e", str(err))

    def test_other_errno(self):
        err = self.error(-errno.ENOMEM, b"")
        self.assertIs(backend.StagingError, type(err))
        self.assertIn("ENOMEM", str(err))

    def test_classify(self):
        self.assertEqual((errno.ENOSPC, False), nfslib.classify(
            -errno.EFAULT, b'pwrite call failed with "\x1c"'))
        self.assertEqual((errno.EFAULT, True), nfslib.classify(
            -errno.EFAULT, b"Command was cancelled"))
        self.assertEqual((errno.EIO, False), nfslib.classify(
            -errno.EFAULT, b'pwrite call failed with "\x63"'))


class LibraryTest(testcase.TestCase):

    def test_missing_library(self):
        err = self.assertRaises(backend.LibraryMissing, nfslib.load_library,
                                "libnfs-dtnm-missing.so.13")
        self.assertIn("libnfs-dtnm-missing.so.13", str(err))
        self.assertIn("apt-get install libnfs13", str(err))
        self.assertIsInstance(err, backend.StagingError)
        err = self.assertRaises(
            backend.LibraryMissing, libnfs.LibnfsBackend,
            "nfs://192.0.2.2/export", library="libnfs-dtnm-missing.so.13")
        self.assertIn("libnfs 4.0", str(err))

    def test_not_libnfs(self):
        err = self.assertRaises(backend.LibraryMissing, nfslib.load_library,
                                "libc.so.6")
        self.assertIn("nfs_init_context", str(err))

    def test_prototypes(self):
        lib = _library_or_skip(self)
        self.assertIs(lib, nfslib.load_library())
        self.assertEqual([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                          ctypes.c_uint64, ctypes.c_void_p],
                         lib.nfs_pwrite.argtypes)
        ctx = lib.nfs_init_context()
        self.assertTrue(ctx)
        try:
            lib.nfs_set_timeout(ctx, 3000)
            self.assertEqual(3000, lib.nfs_get_timeout(ctx))
            lib.nfs_set_error(ctx, b"")
            self.assertEqual(b"", lib.nfs_get_error(ctx))
        finally:
            lib.nfs_destroy_context(ctx)

    def test_pinned_buffers(self):
        data = b"0123456789"
        for obj, want in ((data, data), (bytearray(data), data),
                          (memoryview(data)[3:7], b"3456"),
                          (memoryview(bytearray(data))[5:], b"56789"),
                          (b"", b"")):
            with nfslib.pinned(obj) as (addr, length):
                self.assertEqual(len(want), length)
                if length:
                    self.assertEqual(want, ctypes.string_at(addr, length))
        self.assertRaises(TypeError, nfslib.pinned("text").__enter__)
        self.assertRaises((TypeError, BufferError, ValueError),
                          nfslib.pinned(memoryview(data)[::2]).__enter__)


class BackendOfflineTest(testcase.TestCase):
    """What the backend does before it talks to a server."""

    def setUp(self):
        super().setUp()
        _library_or_skip(self)

    def make(self, url="nfs://192.0.2.2/export/staging?nfsport=2049"
                       "&mountport=20048", **kw):
        be = libnfs.LibnfsBackend(url, connect=False, **kw)
        self.addCleanup(be.close)
        return be

    def test_configuration(self):
        be = self.make()
        self.assertEqual("192.0.2.2", be.server)
        self.assertEqual("/export/staging", be.export)
        self.assertEqual("", be.dir)
        self.assertEqual((2049, 20048), (be.nfsport, be.mountport))
        self.assertEqual(3, be.version)
        self.assertEqual(libnfs.DEFAULT_TIMEOUT, be.timeout)
        self.assertEqual("nfs://192.0.2.2/export/staging", be.where)
        self.assertIsNone(be.max_io)
        self.assertIn("nfs://192.0.2.2/export/staging", repr(be))

    def test_keywords_override_url(self):
        be = self.make("nfs://h/e/d?export=/e&timeout=9&nfsport=1",
                       timeout=3, nfsport=2049, uid=0)
        self.assertEqual(("/e", "d"), (be.export, be.dir))
        self.assertEqual((3.0, 2049, 0), (be.timeout, be.nfsport, be.uid))
        self.assertEqual("nfs://h/e/d", be.where)

    def test_server_export_path(self):
        be = libnfs.LibnfsBackend("2001:db8::2", "/export/", "a/b",
                                  nfsport=2049, connect=False)
        self.assertEqual(("/export", "a/b"), (be.export, be.dir))
        self.assertEqual("nfs://[2001:db8::2]/export/a/b", be.where)
        self.assertRaises(ValueError, libnfs.LibnfsBackend, "h", "/e",
                          "../x", connect=False)
        self.assertRaises(ValueError, libnfs.LibnfsBackend, "h", "e",
                          connect=False)
        self.assertRaises(ValueError, libnfs.LibnfsBackend, "", "/e",
                          connect=False)

    def test_version(self):
        self.assertRaises(ValueError, self.make, version=2)
        be = self.make(version=4)
        err = self.assertRaises(backend.StagingError, be.open_write, "x")
        self.assertIn("NFSv4", str(err))

    def test_free_and_total_bytes(self):
        be = self.make()
        be._mounted = ("/export/staging", "")
        asked = []

        def statvfs(fn, path, ref, what):
            asked.append((fn, path))
            sv = ref._obj
            sv.f_bsize, sv.f_frsize = 1 << 20, 4096
            sv.f_blocks, sv.f_bfree, sv.f_bavail = 1000, 300, 200
            return 0

        be._meta.call = statvfs
        self.assertEqual(200 * 4096, be.free_bytes())
        self.assertEqual(1000 * 4096, be.total_bytes())
        self.assertEqual([(be.lib.nfs_statvfs64, b"/")] * 2, asked)

    def test_hostile_names_need_no_server(self):
        be = self.make()
        for name in ("../x", "/abs", "a/../b", "", "a//b", "x\0"):
            self.assertRaises(ValueError, be.size, name)
            self.assertRaises(ValueError, be.remove, name)
            self.assertRaises(ValueError, be.rename, "ok", name)
            self.assertRaises(ValueError, be.open_write, name)
            self.assertRaises(ValueError, be.open_read, name)
            self.assertRaises(ValueError, be.mkdir, name)


class RetryTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        _library_or_skip(self)
        self.be = libnfs.LibnfsBackend("nfs://192.0.2.2/e", connect=False,
                                       reconnect_timeout=1)
        self.addCleanup(self.be.close)

    def test_retries_unavailable_until_success(self):
        calls = []

        def op():
            calls.append(1)
            if len(calls) < 3:
                raise backend.ConnectionLost("down")
            return "ok"

        self.assertEqual("ok", self.be._retry(op, "op"))
        self.assertEqual(3, len(calls))

    def test_gives_up_after_reconnect_timeout(self):
        def op():
            raise backend.ConnectionLost("still down")

        t0 = time.monotonic()
        err = self.assertRaises(backend.ConnectionLost, self.be._retry, op,
                                "op")
        self.assertLess(time.monotonic() - t0, 3)
        self.assertIn("still down", str(err))
        self.assertIn("retrying for 1 s", str(err))

    def test_no_retry(self):
        for exc in (backend.WritesLost("lost"), backend.NoSpace("full"),
                    backend.StaleHandle("stale")):
            calls = []

            def op():
                calls.append(1)
                raise exc

            self.assertRaises(type(exc), self.be._retry, op, "op")
            self.assertEqual(1, len(calls))
        self.be.reconnect_timeout = 0
        calls = []

        def down():
            calls.append(1)
            raise backend.ConnectionLost("down")

        self.assertRaises(backend.ConnectionLost, self.be._retry, down, "op")
        self.assertEqual(1, len(calls))

    def test_writer_reports_lost_unstable_writes(self):
        w = libnfs.LibnfsWriter.__new__(libnfs.LibnfsWriter)
        w.owner = self.be
        w.name = "img"
        w.conn = libnfs._Connection(self.be)
        w.sync = False
        attempts = []

        def fails_once():
            attempts.append(1)
            if len(attempts) == 1:
                raise backend.ConnectionLost("reset")
            return 7

        # Nothing uncommitted: retried on a new connection.
        w.dirty = False
        self.assertEqual(7, w._guarded(fails_once, what="w"))
        self.assertEqual(2, len(attempts))
        # Unstable writes outstanding: reported at once.
        attempts[:] = []
        w.dirty = True
        err = self.assertRaises(backend.WritesLost, w._guarded, fails_once,
                                what="w")
        self.assertIn("write them again", str(err))
        self.assertEqual(1, len(attempts))
        self.assertFalse(w.dirty)

        # libnfs reconnected inside a successful call.
        def reconnects():
            w.conn.reconnects += 1
            return 1

        w.dirty = True
        err = self.assertRaises(backend.WritesLost, w._guarded, reconnects,
                                what="write img")
        self.assertIn("re-made", str(err))
        w.dirty = False
        self.assertEqual(1, w._guarded(reconnects, what="w"))
