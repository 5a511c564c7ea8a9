"""Staging backend over libnfs, a userspace NFSv3 client, through ctypes.

No kernel NFS client is needed.  The C library, libnfs 4.0 only, is
bound in :mod:`~dtn_migrate.staging.nfslib`.

Durability: :meth:`LibnfsWriter.pwrite` sends UNSTABLE WRITEs and
:meth:`LibnfsWriter.commit` a COMMIT (``nfs_fsync``); ``sync=True`` opens
with ``O_SYNC``, which makes libnfs send FILE_SYNC writes.  libnfs 4.0
ignores the write verifier, so it cannot tell that a restarted server
lost unstable writes; this module watches the connection instead:

* Every :class:`LibnfsWriter` and :class:`LibnfsReader` owns a libnfs
  context (one mount, one TCP connection); the backend has one more for
  names (stat, rename, remove, mkdir, statvfs).  A context is not thread
  safe: each is used under its own lock, so every object may be shared
  between threads and its calls run one at a time.  For parallel streams
  open one writer per thread (on the same name if need be).
* Every RPC has a timeout (``timeout``), so a dead server or a cut link
  gives :class:`~dtn_migrate.staging.backend.ConnectionLost` (an
  ``Unavailable``), never a hang.  The context is then dropped and
  mounted again by the next call.
* Calls that are safe to repeat are retried on a new connection for up
  to ``reconnect_timeout`` seconds, so they ride out a server restart:
  name operations, opens, reads, FILE_SYNC writes, and unstable writes
  and commits while nothing is uncommitted.  A file is opened again by
  name and must still be the same file (file id), else
  :class:`~dtn_migrate.staging.backend.StaleHandle`.
* With unstable writes outstanding, a lost connection raises
  :class:`~dtn_migrate.staging.backend.WritesLost` (an ``Unavailable``)
  at once: everything written since the last successful commit must be
  written again.  libnfs itself reconnects once inside a call (see
  :meth:`LibnfsBackend._mount`); that is noticed from the socket and
  reported the same way.
* ESTALE of an open file raises ``StaleHandle``; ``reopen()`` opens the
  name again.  Name operations remount once on ESTALE (the staging
  directory itself may have been replaced).

What libnfs's errors mean is decoded in :mod:`~dtn_migrate.staging.nfslib`.
"""

import contextlib
import ctypes
import math
import os
import posixpath
import threading
import urllib.parse
import weakref

from dtn_migrate.staging import backend
from dtn_migrate.staging import nfslib
from dtn_migrate.staging import retry

DEFAULT_TIMEOUT = 30.0
DEFAULT_RECONNECT_TIMEOUT = 30.0
#: Largest single nfs_pread/nfs_pwrite call, in server transfers; libnfs
#: sends the pieces of one call in parallel.
CALL_TRANSFERS = 8
#: Transfer size assumed before the server told its own.
DEFAULT_IO = 1 << 20

_URL_KEYS = ("nfsport", "mountport", "version", "uid", "gid", "timeout",
             "reconnect_timeout", "export")


# --------------------------------------------------------------- URLs

def parse_url(url):
    """Keyword arguments of :class:`LibnfsBackend` from an NFS URL::

        nfs://SERVER[:NFSPORT]/EXPORT[/DIR][?ARG=VALUE&...]

    ARGs: nfsport, mountport (fixed ports, no rpcbind), version (3),
    uid, gid, timeout, reconnect_timeout (seconds), export (the leading
    part of the path that is the export, when the server does not allow
    mounting DIR itself; by default the whole path is mounted and shorter
    prefixes are tried when that is refused).
    """
    if not isinstance(url, str):
        raise ValueError("NFS URL must be a string, not %r" % (url,))
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme.lower() != "nfs":
        raise ValueError("not an nfs:// URL: %r" % (url,))
    if parts.fragment:
        raise ValueError("NFS URL %r has a fragment" % (url,))
    if parts.username is not None or parts.password is not None:
        raise ValueError("NFS URL %r must not contain a user" % (url,))
    server = parts.hostname
    if not server:
        raise ValueError("NFS URL %r has no server" % (url,))
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError("NFS URL %r: %s" % (url, exc)) from exc
    kw = {"server": server}
    path = _clean_path(urllib.parse.unquote(parts.path), url)
    seen = set()
    for key, value in urllib.parse.parse_qsl(parts.query,
                                             keep_blank_values=True,
                                             strict_parsing=False):
        if key not in _URL_KEYS:
            raise ValueError("NFS URL %r: unknown argument %r (known: %s)"
                             % (url, key, ", ".join(_URL_KEYS)))
        if key in seen:
            raise ValueError("NFS URL %r: %s given twice" % (url, key))
        seen.add(key)
        if key == "export":
            kw[key] = _clean_path(value, url)
        elif key in ("timeout", "reconnect_timeout"):
            kw[key] = _number(float, key, value, url)
        else:
            kw[key] = _number(int, key, value, url)
            if key in ("nfsport", "mountport") and not 0 < kw[key] < 65536:
                raise ValueError("NFS URL %r: %s=%s is not a port"
                                 % (url, key, value))
    if port is not None:
        if "nfsport" in kw and kw["nfsport"] != port:
            raise ValueError("NFS URL %r: port %d and nfsport=%d differ"
                             % (url, port, kw["nfsport"]))
        kw["nfsport"] = port
    export = kw.pop("export", None)
    if export is None:
        kw["export"], kw["path"] = path, ""
    else:
        if not (path == export or export == "/" or
                path.startswith(export + "/")):
            raise ValueError("NFS URL %r: export=%s is not a leading part "
                             "of %s" % (url, export, path))
        kw["export"] = export
        kw["path"] = path[len(export):].strip("/")
    return kw


def _number(kind, key, value, url):
    try:
        number = kind(value)
    except ValueError:
        number = None
    if number is None or number < 0 or (isinstance(number, float) and
                                        not math.isfinite(number)):
        raise ValueError("NFS URL %r: %s=%r is not a non-negative number"
                         % (url, key, value))
    return number


def _clean_path(path, source):
    """``path`` absolute and normalised; ValueError naming ``source``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError("%r: the export path must be absolute"
                         % (source,))
    if "\0" in path or "?" in path:
        raise ValueError("%r: invalid export path" % (source,))
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError("%r: '.' or '..' in the export path" % (source,))
    return "/" + "/".join(parts)


# --------------------------------------------------------------- contexts

class _Connection:
    """One libnfs context: one mount of the export over one TCP
    connection.  Callers hold :attr:`lock` around every use.
    """

    def __init__(self, owner):
        self.owner = owner
        self.lib = owner.lib
        self.lock = threading.RLock()
        self.ctx = None
        self.generation = 0
        self.readmax = self.writemax = None
        self.socket = None
        self.reconnects = 0     # made again by libnfs inside a call
        self._finalizer = None

    def ensure(self, what=None):
        """The mounted context, mounting when there is none."""
        if self.ctx is None:
            try:
                ctx = self.owner._mount()
            except backend.StagingError as exc:
                if what is None:
                    raise
                raise type(exc)("%s: %s" % (what, exc)) from exc
            self._finalizer = weakref.finalize(
                self, self.lib.nfs_destroy_context, ctx)
            self.ctx = ctx
            self.generation += 1
            self.readmax = int(self.lib.nfs_get_readmax(ctx)) or None
            self.writemax = int(self.lib.nfs_get_writemax(ctx)) or None
            self.socket = self._socket()
        return self.ctx

    def _socket(self):
        """Identity (inode) of the context's TCP socket.  libnfs reconnects
        onto the same descriptor number, but not onto the same socket.
        """
        try:
            return os.fstat(self.lib.nfs_get_fd(self.ctx)).st_ino
        except OSError:
            return None

    def drop(self):
        """Destroy the context; handles opened on it become invalid."""
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self.ctx = None

    def call(self, fn, *args, what):
        """``fn(ctx, *args)`` when >= 0, else raise the mapped error
        (dropping the context when the connection is lost).
        """
        ctx = self.ensure(what)
        self.lib.nfs_set_error(ctx, b"")
        ret = fn(ctx, *args)
        if ret < 0:
            exc = nfslib.make_error(ret, nfslib.error_text(self.lib, ctx),
                                    what)
            if isinstance(exc, backend.ConnectionLost):
                self.drop()
                raise exc
        sock = self._socket()
        if sock != self.socket:
            self.socket = sock
            self.reconnects += 1
        if ret < 0:
            raise exc
        return ret


# --------------------------------------------------------------- files

class _File:
    """A file opened by name on its own connection, opened again by name
    on a new connection when that one was lost.
    """

    write = False

    def __init__(self, owner, name, flags):
        self.owner = owner
        self.name = backend.check_name(name)
        self.flags = flags
        self.conn = _Connection(owner)
        self.fh = None
        self.generation = None
        self.fileid = None
        self.closed = False

    def _what(self, op, offset=None):
        at = "" if offset is None else " at %d" % offset
        return "%s %s%s on %s" % (op, self.name, at, self.owner.where)

    def _open(self, create, truncate=False):
        """Open (or create) by name on the current connection; the file
        id.
        """
        conn, lib = self.conn, self.owner.lib
        conn.ensure(self._what("create" if create else "open"))
        path = self.owner._path(self.name).encode()
        fh = ctypes.c_void_p()
        self.fh = None
        if create:
            conn.call(lib.nfs_create, path,
                      self.flags | (os.O_TRUNC if truncate else 0), 0o644,
                      ctypes.byref(fh), what=self._what("create"))
        else:
            conn.call(lib.nfs_open, path, self.flags, ctypes.byref(fh),
                      what=self._what("open"))
        self.fh = fh.value
        self.generation = conn.generation
        st = nfslib.NfsStat64()
        conn.call(lib.nfs_fstat64, self.fh, ctypes.byref(st),
                  what=self._what("stat"))
        return st.nfs_ino

    def _handle(self):
        """The file handle; after a new connection the name is opened
        again and must still be the same file.
        """
        if self.closed:
            raise ValueError("I/O on closed file %s" % self.name)
        self.conn.ensure(self._what("reopen"))
        if self.fh is None or self.generation != self.conn.generation:
            try:
                fileid = self._open(create=False)
            except backend.StagingNotFound as exc:
                raise backend.StaleHandle(
                    "%s was removed on %s while open"
                    % (self.name, self.owner.where)) from exc
            if fileid != self.fileid:
                fh, self.fh = self.fh, None     # not the file we had
                with contextlib.suppress(backend.StagingError):
                    self.conn.call(self.owner.lib.nfs_close, fh,
                                   what=self._what("close"))
                raise backend.StaleHandle(
                    "%s was replaced on %s while open (file id %d, now %d)"
                    % (self.name, self.owner.where, self.fileid, fileid))
        return self.fh

    def _transfer(self, fn, verb, addr, count, offset, step):
        """``fn(ctx, fh, offset, count, addr)`` (nfs_pread/nfs_pwrite).
        libnfs splits a call into ``step``-sized RPCs sent in parallel;
        when one fails it may report the status of another, so the call
        is then repeated one RPC at a time, which names the failure.
        """
        fh = self._handle()
        try:
            return self.conn.call(fn, fh, offset, count, addr,
                                  what=self._what(verb, offset))
        except backend.AmbiguousStatus as exc:
            if count <= step:
                raise backend.StagingError(str(exc)) from exc
        done = 0
        while done < count:
            n = min(step, count - done)
            got = self.conn.call(fn, fh, offset + done, n, addr + done,
                                 what=self._what(verb, offset + done))
            done += got
            if got < n:
                break
        return done

    def reopen(self):
        """Open the name again on a new connection (after StaleHandle or
        Unavailable); a writer creates a missing file.  The file may now
        be another one.
        """
        with self.conn.lock:
            self.conn.drop()
            self.closed = False
            self.fileid = self.owner._retry(self._first_open,
                                            self._what("reopen"))

    def close(self):
        """Release the handle and the connection.  libnfs COMMITs a
        written handle on close; its failure is not reported (close does
        not promise a commit), and after a lost connection the handle is
        just forgotten.
        """
        with self.conn.lock:
            if self.closed:
                return
            self.closed = True
            fh, self.fh = self.fh, None
            try:
                if fh is not None and self.conn.ctx is not None and \
                        self.generation == self.conn.generation:
                    self.conn.call(self.owner.lib.nfs_close, fh,
                                   what=self._what("close"))
            except backend.StagingError:
                pass
            finally:
                self.conn.drop()


class LibnfsWriter(_File, backend.Writer):
    """An open file being written; see the module docstring for what is
    retried.
    """

    write = True

    def __init__(self, owner, name, sync=False, truncate=False):
        super().__init__(owner, name, os.O_WRONLY | os.O_NOFOLLOW |
                         (os.O_SYNC if sync else 0))
        self.sync = sync
        self.dirty = False      # unstable writes since the last commit
        with self.conn.lock:
            self.fileid = owner._retry(
                lambda: self._first_open(truncate), self._what("create"))

    def _first_open(self, truncate=False):
        try:
            return self._open(create=True, truncate=truncate)
        except backend.StagingNotFound:
            self.owner._makedirs(self.conn, posixpath.dirname(self.name))
            return self._open(create=True, truncate=truncate)

    def pwrite(self, data, offset):
        """Write all of ``data`` at ``offset``: FILE_SYNC when opened with
        ``sync``, else UNSTABLE until :meth:`commit`.
        """
        with self.conn.lock, nfslib.pinned(data) as (addr, length):
            done = 0
            while done < length:
                at = offset + done
                count = min(length - done, self._limit())
                wrote = self._guarded(self._write, addr + done, count, at,
                                      what=self._what("write", at))
                if wrote <= 0:
                    raise backend.StagingError("%s: the server wrote "
                                               "nothing" % self._what(
                                                   "write", at))
                done += wrote

    def _limit(self):
        return (self.conn.writemax or DEFAULT_IO) * CALL_TRANSFERS

    def _write(self, addr, count, offset):
        if not self.sync:
            self.dirty = True   # even if it fails halfway
        return self._transfer(self.owner.lib.nfs_pwrite, "write", addr,
                              count, offset,
                              self.conn.writemax or DEFAULT_IO)

    def truncate(self, size):
        """Set the file's size (SETATTR, which the server makes stable
        before it answers); a grown part reads as zeros unwritten.
        """
        with self.conn.lock:
            self._guarded(self._truncate, size,
                          what=self._what("truncate", size))

    def _truncate(self, size):
        return self.conn.call(self.owner.lib.nfs_ftruncate, self._handle(),
                              size, what=self._what("truncate", size))

    def commit(self):
        """COMMIT everything written so far (``nfs_fsync``)."""
        with self.conn.lock:
            self._guarded(self._commit, what=self._what("commit"))
            self.dirty = False

    def _commit(self):
        return self.conn.call(self.owner.lib.nfs_fsync, self._handle(),
                              what=self._what("commit"))

    def _guarded(self, fn, *args, what):
        """``fn(*args)``, retried on new connections while nothing
        uncommitted can have been lost; else
        :class:`~dtn_migrate.staging.backend.WritesLost`.
        """
        def attempt():
            dirty = self.dirty
            before = self.conn.reconnects
            try:
                result = fn(*args)
            except backend.ConnectionLost as exc:
                self.dirty = False
                if not dirty:
                    raise       # only this call's own data was at risk
                raise backend.WritesLost(
                    "%s; unstable writes since the last commit may be "
                    "lost: write them again" % exc) from exc
            if dirty and self.conn.reconnects != before:
                # libnfs re-made the connection inside the call and sent
                # it again: the server may have restarted in between.
                raise backend.WritesLost(
                    "%s: the connection to the NFS server was re-made; "
                    "unstable writes since the last commit may be lost: "
                    "write them again" % what)
            return result

        return self.owner._retry(attempt, what)


class LibnfsReader(_File, backend.Reader):
    """An open file being read; reads ride out reconnections."""

    def __init__(self, owner, name):
        super().__init__(owner, name, os.O_RDONLY | os.O_NOFOLLOW)
        with self.conn.lock:
            self.fileid = owner._retry(self._first_open, self._what("open"))

    def _first_open(self):
        return self._open(create=False)

    def pread(self, size, offset):
        """Up to ``size`` bytes at ``offset``; fewer only at end of file."""
        if size <= 0:
            return b""
        if size < 2:
            buf = bytearray(size)
            return bytes(buf[:self.readinto(buf, offset)])
        # Read straight into the bytes object handed out: no zero fill,
        # no copy (only a short read at the end of the file copies).
        buf = nfslib.unfilled_bytes(size)
        n = self.readinto(buf, offset)
        return buf if n == size else buf[:n]

    def readinto(self, buf, offset, length=None):
        """Fill the writable buffer ``buf`` (its first ``length`` bytes,
        when given) from ``offset``; the number of bytes read (less only
        at end of file).
        """
        if length is not None:
            buf = memoryview(buf)[:length]
        with self.conn.lock, nfslib.pinned(buf) as (addr, length):
            done = 0
            while done < length:
                at = offset + done
                count = min(length - done, self._limit())
                got = self.owner._retry(
                    lambda: self._read(addr + done, count, at),
                    self._what("read", at))
                if got == 0:
                    break
                done += got
            return done

    def _limit(self):
        return (self.conn.readmax or DEFAULT_IO) * CALL_TRANSFERS

    def _read(self, addr, count, offset):
        return self._transfer(self.owner.lib.nfs_pread, "read", addr, count,
                              offset, self.conn.readmax or DEFAULT_IO)


# --------------------------------------------------------------- backend

class LibnfsBackend(backend.Backend):
    """A directory on an NFSv3 export, reached through libnfs.

    ``LibnfsBackend("nfs://192.0.2.2/export/staging?nfsport=2049"
    "&mountport=20048")``, or ``LibnfsBackend("192.0.2.2", "/export",
    "staging", nfsport=2049, mountport=20048)``.  Keyword arguments that
    are not None override the URL's (see :func:`parse_url`).

    :param export: the export to mount; with a URL and no ``export=``
        the whole path is mounted, or the longest leading part the
        server accepts.
    :param path: the staging directory inside the export (must exist).
    :param nfsport, mountport: fixed ports; None asks rpcbind (port 111).
    :param version: 3 (4 only reads: libnfs 4.0 cannot WRITE over v4).
    :param timeout: seconds an RPC (and roughly a TCP connect) may take.
    :param reconnect_timeout: seconds to keep retrying a repeatable
        operation on new connections (0: raise at once).
    :param uid, gid: AUTH_SYS identity (default: this process's).
    :param connect: mount now, so that a wrong URL fails here.
    """

    def __init__(self, server, export=None, path=None, nfsport=None,
                 mountport=None, version=None, timeout=None,
                 reconnect_timeout=None, uid=None, gid=None, connect=True,
                 library=nfslib.LIBRARY):
        given = {k: v for k, v in dict(
            path=path, nfsport=nfsport, mountport=mountport,
            version=version, timeout=timeout,
            reconnect_timeout=reconnect_timeout, uid=uid,
            gid=gid).items() if v is not None}
        if export is None:
            opts = parse_url(server)
            self._auto = "export" not in _query_keys(server)
        else:
            opts = {"server": server, "export": _clean_path(
                export, export)}
            self._auto = False
        opts.update(given)
        self.server = opts["server"]
        if not self.server:
            raise ValueError("no NFS server given")
        self.export = opts["export"]
        self.dir = "/".join(p for p in str(opts.get("path") or "").split(
            "/") if p)
        if self.dir:
            backend.check_name(self.dir)
        self.nfsport = opts.get("nfsport")
        self.mountport = opts.get("mountport")
        self.version = int(opts.get("version", 3))
        if self.version not in (3, 4):
            raise ValueError("NFS version must be 3 (or 4, read only), "
                             "not %r" % (self.version,))
        self.timeout = float(opts.get("timeout", DEFAULT_TIMEOUT))
        self.reconnect_timeout = float(opts.get("reconnect_timeout",
                                                DEFAULT_RECONNECT_TIMEOUT))
        self.uid = opts.get("uid")
        self.gid = opts.get("gid")
        full = posixpath.join(self.export, self.dir)
        self.where = "nfs://%s%s" % (
            "[%s]" % self.server if ":" in self.server else self.server,
            full.rstrip("/") or "/")
        self.lib = nfslib.load_library(library)
        self._mounted = None    # (export that mounted, directory in it)
        self._io = None
        self._mount_lock = threading.Lock()
        self._meta = _Connection(self)
        if connect:
            self.connect()

    def __repr__(self):
        return "<LibnfsBackend %s>" % self.where

    @property
    def max_io(self):
        """The server's READ/WRITE transfer size (None before mounting).
        A larger request works too: libnfs sends its transfers in
        parallel (up to :data:`CALL_TRANSFERS` per call).
        """
        return self._io

    def connect(self):
        """Mount now and check that the staging directory exists."""
        def check():
            st = self._stat(self._path(None), "stat %s" % self.where)
            if st is None:
                raise backend.StagingNotFound(
                    "staging directory %s does not exist" % self.where)
            if (st.nfs_mode & 0o170000) != 0o040000:
                raise backend.StagingError("%s is not a directory"
                                           % self.where)

        with self._meta.lock:
            self._retry(lambda: self._stale_once(check),
                        "mount %s" % self.where)

    # -- connections
    def _mount(self):
        """A new context with the export mounted."""
        lib = self.lib
        ctx = lib.nfs_init_context()
        if not ctx:
            raise backend.StagingError("nfs_init_context failed for %s"
                                       % self.where)
        try:
            seconds = max(1, int(math.ceil(self.timeout)))
            lib.nfs_set_timeout(ctx, seconds * 1000)
            # A connect gives up after 2**(syncnt+1) - 1 s of SYNs.
            lib.nfs_set_tcp_syncnt(ctx, max(1, min(6, int(
                math.log2(seconds + 1)))))
            # One immediate reconnect.  With 0, libnfs 4.0 leaves the
            # RPCs of a sync call queued when the socket hangs up, and
            # destroying the context then runs their callbacks against
            # the returned call's stack (a crash).  With 1 a failure
            # first fails all queued RPCs inside the call, and a success
            # shows as a new socket (_Connection.reconnects).
            lib.nfs_set_autoreconnect(ctx, 1)
            lib.nfs_set_dircache(ctx, 0)
            if self.uid is not None:
                lib.nfs_set_uid(ctx, int(self.uid))
            if self.gid is not None:
                lib.nfs_set_gid(ctx, int(self.gid))
            # Ports (and traversal) can only be set through a URL.
            args = ["auto-traverse-mounts=0", "version=%d" % self.version]
            if self.nfsport is not None:
                args.append("nfsport=%d" % int(self.nfsport))
            if self.mountport is not None:
                args.append("mountport=%d" % int(self.mountport))
            url = lib.nfs_parse_url_dir(
                ctx, ("nfs://localhost/?" + "&".join(args)).encode())
            if not url:
                text = nfslib.error_text(lib, ctx)
                raise backend.StagingError("libnfs refused %s: %s" % (
                    args, text.decode("utf-8", "replace")))
            lib.nfs_destroy_url(url)
            self._mount_export(ctx)
            self._io = min(int(lib.nfs_get_readmax(ctx)),
                           int(lib.nfs_get_writemax(ctx))) or None
        except BaseException:
            lib.nfs_destroy_context(ctx)
            raise
        return ctx

    def _mount_export(self, ctx):
        """Mount: the export that worked before; else the configured one
        or, for a URL without ``export=``, the whole path and then ever
        shorter leading parts while the server refuses.
        """
        with self._mount_lock:
            mounted = self._mounted
        if mounted is not None:
            candidates = [mounted[0]]
        else:
            candidates = [self.export]
            if self._auto:
                prefix = self.export
                while prefix != "/":
                    prefix = posixpath.dirname(prefix)
                    candidates.append(prefix)
        full = posixpath.join(self.export, self.dir).rstrip("/") or "/"
        first = None
        for export in candidates:
            self.lib.nfs_set_error(ctx, b"")
            ret = self.lib.nfs_mount(ctx, self.server.encode(),
                                     export.encode())
            if ret == 0:
                inside = full[len(export):].strip("/")
                with self._mount_lock:
                    if self._mounted is None:
                        self._mounted = (export, inside)
                return
            exc = nfslib.make_error(ret, nfslib.error_text(self.lib, ctx),
                                    "mount %s:%s" % (self.server, export))
            if not isinstance(exc, (backend.StagingNotFound,
                                    backend.PermissionDenied)):
                raise exc
            first = first or exc
        raise type(first)("%s (the export or directory does not exist, or "
                          "this client may not mount it)" % first)

    def _retry(self, op, what):
        """``op()``; on Unavailable (except
        :class:`~dtn_migrate.staging.backend.WritesLost`) try again with
        backoff for up to ``reconnect_timeout`` seconds.
        """
        def retryable(exc):
            return (isinstance(exc, backend.Unavailable)
                    and not isinstance(exc, backend.WritesLost))

        try:
            return retry.call(lambda attempt: op(), retryable,
                              retry.within(self.reconnect_timeout),
                              retry.doubling(0.1, 2.0))
        except backend.Unavailable as exc:
            if self.reconnect_timeout <= 0 or not retryable(exc):
                raise
            raise type(exc)("%s (still failing after retrying for %.0f s)"
                            % (exc, self.reconnect_timeout)) from exc

    def _stale_once(self, op):
        """``op()``, again on a new mount after ESTALE: a name operation
        meets ESTALE when the staging directory was replaced.
        """
        try:
            return op()
        except backend.StaleHandle:
            self._meta.drop()
            return op()

    def _meta_op(self, op, what):
        with self._meta.lock:
            return self._retry(lambda: self._stale_once(op), what)

    # -- names
    def _path(self, name):
        """Path of ``name`` inside the mounted export (mounts if the
        split of URL path into export and directory is not known yet).
        """
        if self._mounted is None:
            with self._meta.lock:
                self._meta.ensure()
        parts = [self._mounted[1]] if self._mounted[1] else []
        if name:
            parts.append(backend.check_name(name))
        return "/" + "/".join(parts)

    def _stat(self, path, what):
        st = nfslib.NfsStat64()
        try:
            self._meta.call(self.lib.nfs_stat64, path.encode(),
                            ctypes.byref(st), what=what)
        except backend.StagingNotFound:
            return None
        return st

    def _makedirs(self, conn, dirname):
        """mkdir -p of ``dirname`` (a checked name) on ``conn``."""
        if not dirname:
            return
        parts = dirname.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            try:
                conn.call(self.lib.nfs_mkdir2, self._path(sub).encode(),
                          0o755, what="mkdir %s on %s" % (sub, self.where))
            except backend.StagingError as exc:
                if "NFS3ERR_EXIST" not in str(exc):
                    raise

    # -- Backend interface
    def open_write(self, name, sync=False, truncate=False):
        if self.version != 3:
            raise backend.StagingError(
                "libnfs 4.0 cannot write over NFSv4 (%s); use version=3"
                % self.where)
        return LibnfsWriter(self, name, sync=sync, truncate=truncate)

    def open_read(self, name):
        return LibnfsReader(self, name)

    def size(self, name):
        backend.check_name(name)

        what = "stat %s on %s" % (name, self.where)

        def op():
            st = self._stat(self._path(name), what)
            return None if st is None else st.nfs_size

        return self._meta_op(op, what)

    def remove(self, name):
        backend.check_name(name)

        def op():
            try:
                self._meta.call(self.lib.nfs_unlink,
                                self._path(name).encode(),
                                what="remove %s on %s" % (name, self.where))
            except backend.StagingNotFound:
                pass

        self._meta_op(op, "remove %s on %s" % (name, self.where))

    def rename(self, old, new):
        backend.check_name(old)
        backend.check_name(new)
        what = "rename %s to %s on %s" % (old, new, self.where)
        tries = []

        def op():
            old_path, new_path = self._path(old), self._path(new)
            tries.append(1)
            try:
                self._meta.call(self.lib.nfs_rename, old_path.encode(),
                                new_path.encode(), what=what)
            except backend.StagingNotFound:
                # A repeated RENAME whose first attempt went through.
                if len(tries) > 1 and \
                        self._stat(old_path, what) is None and \
                        self._stat(new_path, what) is not None:
                    return
                raise

        self._meta_op(op, what)

    def mkdir(self, name):
        """Create directory ``name`` and its parents (mkdir -p)."""
        name = backend.check_name(name)
        self._meta_op(lambda: self._makedirs(self._meta, name),
                      "mkdir %s on %s" % (name, self.where))

    def rmdir(self, name):
        backend.check_name(name)
        what = "rmdir %s on %s" % (name, self.where)

        def op():
            try:
                self._meta.call(self.lib.nfs_rmdir,
                                self._path(name).encode(), what=what)
            except backend.StagingNotFound:
                pass

        self._meta_op(op, what)

    def _statvfs(self):
        what = "statvfs on %s" % self.where

        def op():
            sv = nfslib.NfsStatvfs64()
            self._meta.call(self.lib.nfs_statvfs64,
                            self._path(None).encode(), ctypes.byref(sv),
                            what=what)
            return sv

        return self._meta_op(op, what)

    def free_bytes(self):
        sv = self._statvfs()
        return sv.f_bavail * (sv.f_frsize or sv.f_bsize)

    def total_bytes(self):
        sv = self._statvfs()
        return sv.f_blocks * (sv.f_frsize or sv.f_bsize)

    def reconnect(self):
        """Drop the name connection; the next call mounts again."""
        with self._meta.lock:
            self._meta.drop()

    def close(self):
        """Release the name connection (open files keep their own)."""
        with self._meta.lock:
            self._meta.drop()


def _query_keys(url):
    return {k for k, _ in urllib.parse.parse_qsl(
        urllib.parse.urlsplit(url).query, keep_blank_values=True)}
