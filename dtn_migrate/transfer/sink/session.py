"""One source's session at the sink: its control connection, and the
partial copies of the files it announces.

A ``SinkSession`` is created by the ``SinkServer`` (``sink.server``) for each
authenticated control connection and joined by the session's data
streams.  It answers NEW_FILE by creating (or reopening, on resume) the
file's partial copy under ``<root>/.dtn-partial/<transfer>/``: sized by
ftruncate, preallocated only for files of PREALLOCATE_MIN or more in
sessions without zero extents, and marked UNCONFIRMED until its first
objects are reported durable.  Receiving and writing objects is
``sink.recv``'s, the contiguous-prefix sha512 ``sink.hash``'s, durability
batches and the final rename ``sink.sync``'s; this module holds the
session's state, its files' opening and closing, and its teardown.
"""

import errno
import logging
import os
import threading
import time

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import direct
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import paths
from dtn_migrate.transfer.sink import file as sinkfile
from dtn_migrate.transfer.sink import hash as sinkhash
from dtn_migrate.transfer.sink import recv as sinkrecv
from dtn_migrate.transfer.sink import room as sinkroom
from dtn_migrate.transfer.sink import sync as sinksync
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

# Files smaller than this are not preallocated: a fallocate costs more
# than it saves for them (many small files).
PREALLOCATE_MIN = 4 << 20


class SinkSession(sinkrecv.ReceiveMixin, sinkhash.HashMixin,
                  sinksync.DurabilityMixin):
    """One connected source: its control and data connections, open
    files, pending durability batch and hashers.
    """

    def __init__(self, server, connect, conn, epoch, plane, record,
                 caps=P.Caps.NONE):
        self.server = server
        self.cfg = server.cfg
        self.root = server.root
        self.transfer_id = connect.transfer_id.hex()
        self.peer = connect.peer
        self.epoch = epoch
        self.streams = connect.streams
        self.object_size = connect.object_size
        self.control = conn
        # Key of the objects' digests (None without frame authentication).
        self.object_key = conn.object_key
        self.plane = plane
        self.record = record
        self.pool = server.pool_for(connect.object_size)
        # Optional capabilities agreed for the session (Caps).
        self.caps = P.Caps(caps)
        # Buffers held for the prefix hashers (objects that arrived ahead
        # of their file's hashed prefix): at most half the pool.
        self.held_count = 0
        self.hold_limit = max(1, self.pool.count // 2)
        self.ckpt_lock = threading.Lock()
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.sync_lock = threading.Lock()
        self.files = {}
        self.retired = set()
        self.pending = {}
        self.pending_bytes = 0
        self.sync_due = None    # monotonic time of the next early sync
        self.installed = []
        self.tasks = 0
        self.data = {}
        self.closed = False
        # Set once close() has ended: a reconnection waits for it.
        self.gone = threading.Event()
        self.pdir = self.root.partial_dir(self.transfer_id)
        # Has the peer's staging usage been counted for this session?
        self.quota_counted = False
        self.pdir_durable = False
        # On tmpfs, fallocate would only zero-fill memory that the objects
        # overwrite anyway (0.3 s per GiB here): space is checked instead.
        # With zero extents the source sends no bytes for the zero parts
        # of a file: they stay holes, so nothing is preallocated.
        self.preallocate = server.cfg.preallocate and \
            not server.memory_fs and \
            not self.caps & P.Caps.ZERO_EXTENTS
        self.outbox = stream.Outbox(conn, self._outbox_failed, "sink-out")
        self.syncer = threading.Thread(target=self._sync_loop,
                                       name="sink-sync", daemon=True)
        self.syncer.start()

    def _outbox_failed(self, exc):
        LOG.info("sink: transfer %s: control connection lost: %s",
                 self.transfer_id, exc)
        self.control.shutdown()

    # Control connection.
    def run_control(self):
        reason = "control connection closed"
        try:
            while True:
                msg = self.control.recv(expect=(
                    P.MsgType.NEW_FILE, P.MsgType.FILE_CLOSE,
                    P.MsgType.BYE, P.MsgType.ABORT))
                if isinstance(msg, P.NewFile):
                    self.outbox.post(self._check_new_file(msg) or
                                     self._open_file(msg))
                elif isinstance(msg, P.FileClose):
                    self._declare(msg)
                elif isinstance(msg, P.Bye):
                    self._sync_now()
                    self.outbox.post(P.Bye(P.ByeFlags.ACK))
                    reason = "finished"
                    return
                else:
                    reason = "aborted by source: %s" % msg.message
                    LOG.info("sink: transfer %s %s", self.transfer_id, reason)
                    return
        except errors.ProtocolError as exc:
            reason = str(exc)
            self.record.last_error = reason
            LOG.warning("sink: transfer %s from %s: %s", self.transfer_id,
                        self.peer, exc)
            self.outbox.post(P.Error(exc.code, 1, P.NO_FILE, reason[:1000]))
        except (ConnectionError, OSError) as exc:
            reason = str(exc)
        finally:
            self.close(reason)

    def _check_new_file(self, msg):
        """Session bounds of a NEW_FILE: its object size is the
        session's (so its done set and bitmap are sized by the file, not
        by the peer's choice), and the session holds at most
        ``max_open_files`` files (their bitmaps: ``_check_bitmaps``, once
        the file is known to fit the file system).  A FILE_ID REFUSED,
        or None if it fits.
        """
        if msg.object_size != self.object_size:
            return self._refuse(msg, errors.BoundsError(
                "%s: object size %d differs from the session's %d"
                % (msg.name, msg.object_size, self.object_size)))
        held = self.held_files(msg.file_id)
        if held >= self.cfg.max_open_files:
            return self._refuse(msg, errors.TransferError(
                "%s: the session already holds %d open files, the sink's "
                "limit" % (msg.name, held), errors.Code.LIMIT))
        held += self.server.open_files(self.peer, but=self)
        if held >= self.cfg.max_open_files_per_peer:
            return self._refuse(msg, errors.TransferError(
                "%s: peer %s already holds %d open files, the sink's limit "
                "per peer" % (msg.name, self.peer, held), errors.Code.LIMIT))
        return None

    def held_files(self, but=None):
        """Files this session holds open (``but``: a file id not
        counted).
        """
        with self.lock:
            return sum(1 for f in self.files.values()
                       if f.state in ("open", "closing") and
                       f.file_id != but)

    def _check_bitmaps(self, msg):
        """The session's done-set bitmaps stay within
        ``max_session_bitmap_bytes`` with this file's: a FILE_ID REFUSED,
        or None if it fits.
        """
        with self.lock:
            held = [f.nobjects for f in self.files.values()
                    if f.state in ("open", "closing") and
                    f.file_id != msg.file_id]
        need = sum(bitmap.nbytes(n) for n in held + [msg.nobjects])
        if need <= self.cfg.max_session_bitmap_bytes:
            return None
        return self._refuse(msg, errors.BoundsError(
            "%s: %d objects of %d bytes would take the session's "
            "done-set bitmaps to %d bytes, more than the sink's %d"
            % (msg.name, msg.nobjects, msg.object_size, need,
               self.cfg.max_session_bitmap_bytes)))

    def _refuse(self, msg, exc):
        LOG.warning("sink: transfer %s from %s: refusing %r: %s",
                    self.transfer_id, self.peer, msg.name, exc)
        self.record.set_file(msg.name, size=msg.size, state="failed",
                             error=str(exc))
        self.retired.add(msg.file_id)
        return P.FileId(msg.file_id, P.FileStatus.REFUSED, exc.code,
                        str(exc)[:1000])

    def _open_file(self, msg):
        try:
            parts = self.server.confine(self.peer, self.transfer_id,
                                        msg.name)
            self.root.check_dirs(parts)
        except errors.BadNameError as exc:
            return self._refuse(msg, exc)
        except OSError as exc:
            return self._refuse(msg, errors.BadNameError(
                "%s: %s" % (msg.name, exc.strerror)))
        flags = P.FileFlags(msg.flags)
        with self.lock:
            old = self.files.get(msg.file_id)
            if old is not None:
                if not flags & P.FileFlags.RESTART:
                    raise errors.ProtocolError("file %d announced twice"
                                               % msg.file_id)
                old.state = "replaced"
                while old.inflight or old.hashing:
                    self.cond.wait(1.0)
                self._close_file(old)
                del self.files[msg.file_id]
            self.retired.discard(msg.file_id)
        vfs = os.statvfs(self.pdir)
        if msg.size > vfs.f_blocks * vfs.f_frsize:
            # Refused before anything is sized from the message (its done
            # set could otherwise claim billions of objects).
            return self._refuse(msg, errors.NoSpaceError(
                "not enough space for %s: %d bytes is more than the sink's "
                "whole file system (%d bytes)"
                % (msg.name, msg.size, vfs.f_blocks * vfs.f_frsize)))
        refused = self._check_bitmaps(msg)
        if refused is not None:
            return refused
        try:
            if not flags & (P.FileFlags.RESTART | P.FileFlags.GROWING) and \
                    self._already_there(msg, parts):
                self.retired.add(msg.file_id)
                # Verified earlier if its recorded sha512 was compared.
                self.record.set_file(msg.name, size=msg.size, state="done",
                                     verified=bool(
                                         flags & P.FileFlags.HAS_SHA512),
                                     durable=msg.size,
                                     path=os.path.join(self.root.path,
                                                       msg.name))
                return P.FileId(msg.file_id, P.FileStatus.SKIP)
            self._charge(msg)
            f, status = self._prepare(msg, parts, flags)
        except errors.TransferError as exc:
            return self._refuse(msg, exc)
        except OSError as exc:
            code = errors.Code.NO_SPACE if exc.errno in (
                errno.ENOSPC, errno.EDQUOT) else errors.Code.IO
            return self._refuse(msg, errors.TransferError(
                "cannot create the partial copy of %s: %s"
                % (msg.name, exc.strerror), code))
        with self.lock:
            self.files[msg.file_id] = f
        self.record.set_file(msg.name, size=f.size, state="open",
                             durable=f.durable_prefix(),
                             path=os.path.join(self.root.path,
                                               paths.PARTIAL_DIR,
                                               self.transfer_id, f.part))
        if f.durable.full:
            self._after_durable(f)
        else:
            self._kick_hash(f)
        return P.FileId(msg.file_id, status)

    def _already_there(self, msg, parts):
        """Does the final file exist with this file's metadata?"""
        try:
            dfd = self.root.open_dir(parts, create=False)
        except (FileNotFoundError, NotADirectoryError, errors.BadNameError):
            return False
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW |
                         os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except OSError:
            return False
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if not (os.path.stat.S_ISREG(st.st_mode) and
                    st.st_size == msg.size):
                return False
            if msg.flags & P.FileFlags.HAS_SHA512:
                try:
                    return os.getxattr(fd, sinkfile.XATTR_SHA512) == \
                        msg.sha512.hex().encode()
                except OSError:
                    return False
            return st.st_mtime_ns == msg.mtime_ns
        finally:
            os.close(fd)

    def _charge(self, msg):
        """The peer's staging quota admits the file (QuotaError)."""
        quota = self.server.quota
        if quota is None:
            return
        try:
            st = os.stat(sinkfile.partial_key(msg.name) + ".part",
                         dir_fd=self.pdir, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        quota.admit(self, msg, st and st.st_size)

    def _prepare(self, msg, parts, flags):
        """Open (or create) the partial copy; return (SinkFile, status)."""
        key = sinkfile.partial_key(msg.name)
        part = key + ".part"
        done = bitmap.Bitmap.decode_runs(msg.done, msg.nobjects)
        try:
            st = os.stat(part, dir_fd=self.pdir, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        fresh = flags & P.FileFlags.RESTART or not len(done) or \
            st is None or st.st_size != msg.size or \
            self._exists(key + sinkfile.UNCONFIRMED)
        status = P.FileStatus.OPEN
        if fresh and len(done):
            status = P.FileStatus.RESET
        if fresh:
            # The old content's hash checkpoint goes first: a crash while
            # the partial copy is recreated must not leave it behind.
            self._unlink(key + ".sha")
            # A copy created afresh holds nothing a done set may claim
            # until it reports objects of its own: the source may not
            # have heard the RESET (or logged its RESTART) before a crash.
            os.close(os.open(key + sinkfile.UNCONFIRMED,
                             os.O_WRONLY | os.O_CREAT |
                             os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=self.pdir))
            fd = self._create(part, msg, st)
            done = bitmap.Bitmap(msg.nobjects)
            hasher = checksum.ResumableSha512()
            sidecar = False
        else:
            fd = os.open(part, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=self.pdir)
            hasher = self._load_hash(key + ".sha", done, msg)
            sidecar = True
        if flags & P.FileFlags.NO_SHA512:
            hasher = None
        f = sinkfile.SinkFile(msg, parts, key, fd, done, hasher)
        if self.cfg.direct_io:
            f.dfd = direct.reopen(fd)
        f.unconfirmed = bool(fresh)
        f.fresh = bool(fresh)
        f.has_sidecar = sidecar
        if not fresh:
            # What the copy holds past the hash checkpoint is read back
            # (only that).
            f.on_disk = bitmap.Bitmap(msg.nobjects, raw=done.bits)
        return f, status

    def _exists(self, name):
        try:
            os.stat(name, dir_fd=self.pdir, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False

    def _confirm(self, files):
        """Drop the mark of copies created afresh before their first
        objects are reported (the directory sync that precedes the
        report makes it durable).
        """
        for f in files:
            if f.unconfirmed:
                self._unlink(f.key + sinkfile.UNCONFIRMED)
                f.unconfirmed = False

    def _create(self, part, msg, st):
        free = sinkroom.free_bytes(self.pdir)
        if st is not None:
            free += st.st_blocks * 512
        sinkroom.check_free(msg.name, msg.size, free,
                            self.cfg.min_free_bytes)
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC |
                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.pdir)
        try:
            if self.preallocate and msg.size >= PREALLOCATE_MIN:
                os.posix_fallocate(fd, 0, msg.size)
            else:
                os.ftruncate(fd, msg.size)
        except OSError as exc:
            os.close(fd)
            self._unlink(part)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise errors.NoSpaceError(
                    "not enough space for %s (%d bytes): %s"
                    % (msg.name, msg.size, exc.strerror))
            raise
        return fd

    def _load_hash(self, sidecar, done, msg):
        try:
            fd = os.open(sidecar, os.O_RDONLY | os.O_NOFOLLOW,
                         dir_fd=self.pdir)
        except OSError:
            return checksum.ResumableSha512()
        try:
            blob = os.read(fd, 4096)
        finally:
            os.close(fd)
        h = checksum.ResumableSha512.restore(blob)
        prefix = min(msg.size, done.prefix() * msg.object_size)
        if h is None or h.offset > prefix:
            return checksum.ResumableSha512()
        return h

    def _unlink(self, name):
        try:
            os.unlink(name, dir_fd=self.pdir)
        except FileNotFoundError:
            pass

    def _close_file(self, f):
        with self.lock:
            fd, f.fd = f.fd, None
            dfd, f.dfd = f.dfd, None
        for one in (fd, dfd):
            if one is not None:
                os.close(one)
        self._drop_held(f)

    def _declare(self, msg):
        with self.lock:
            f = self.files.get(msg.file_id)
            if f is None:
                if msg.file_id in self.retired:
                    return
                raise errors.ProtocolError("FILE_CLOSE for unknown file %d"
                                           % msg.file_id)
            if msg.size != f.size:
                raise errors.BoundsError("FILE_CLOSE size %d differs from "
                                         "NEW_FILE size %d"
                                         % (msg.size, f.size))
            if f.verify:
                f.expected = msg.sha512
        self._maybe_finalize(f)

    def _fail(self, f, exc, code=None):
        if code is None:
            code = errors.Code.NO_SPACE if getattr(exc, "errno", None) in (
                errno.ENOSPC, errno.EDQUOT) else errors.Code.IO
        with self.lock:
            if f.state not in ("open", "closing"):
                return
            f.state = "failed"
            self.retired.add(f.file_id)
        self._drop_held(f)
        message = "%s: %s" % (f.name, getattr(exc, "strerror", None) or exc)
        LOG.error("sink: transfer %s: file failed: %s", self.transfer_id,
                  message)
        self.record.set_file(f.name, state="failed", error=message)
        self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.FAILED, code,
                                     f.size, bytes(64), message[:1000]))

    # Teardown.
    def close(self, reason):
        """Close the session (once; a second call returns at once, see
        ``gone``).
        """
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
            conns = list(self.data.values())
        try:
            self._close(conns, reason)
        finally:
            self.gone.set()
            self.server.let_go(self)

    def _close(self, conns, reason):
        self.server.forget(self)
        for conn in conns:
            conn.shutdown()
        deadline = time.monotonic() + 30.0
        with self.cond:
            while (self.data or self.tasks) and time.monotonic() < deadline:
                self.cond.wait(0.5)
        self._sync_now()
        with self.lock:
            files = list(self.files.values())
        for f in files:
            # The hashed prefix, if it is durable (a restart compares the
            # checkpoint with the done set); else the last state kept
            # for a durable offset.
            if f.hasher is not None and f.fd is not None:
                try:
                    if f.saved_ckpt < f.hasher.offset <= \
                            f.durable_prefix():
                        self._save_hash(f)
                    else:
                        self._durable_checkpoint(f)
                except OSError:
                    pass
            self._close_file(f)
        self.outbox.close()
        self.control.close()
        self.syncer.join(5.0)
        self.plane.close()
        try:
            os.close(self.pdir)
        except OSError:
            pass
        self.root.remove_partial_dir(self.transfer_id)
        LOG.info("sink: transfer %s session %d closed: %s", self.transfer_id,
                 self.epoch, reason)
