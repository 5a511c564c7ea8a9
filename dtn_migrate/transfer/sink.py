"""Sink side: accept transfers from authenticated peers into a staging root.

``SinkServer`` listens on one port.  Each connection authenticates
(see ``auth``) and is either a session's control connection or one of
its data streams.  For every announced file the sink creates a partial
copy under ``<root>/.dtn-partial/<transfer>/``, preallocated to the final
size; objects are checked (bounds, then xxh3) and written at their
offsets by the shared I/O threads; a per-session syncer makes batches of
them durable with fdatasync and only then reports them with BLOCK_SYNC.
A hasher follows the durable contiguous prefix with sha512 and saves its
state next to the partial copy, so neither a reconnect nor a restart
re-reads what was already hashed.  When every object is durable and the
hash matches the source's, the copy is renamed to its final name.

Malformed input closes only the connection that carried it; sessions of
other transfers, the partial copies and the source's log are untouched.

A transfer belongs to the peer that first sent it: ``owner`` looks up
who that was across restarts, and any other peer is refused.  A REPORT
connection only fetches the import report the sink's side stored for a
transfer (``reports``), given only to that owner; it creates no session
or record.  ``on_session`` records every control session before it is
acknowledged; ``on_incoming`` hears of it afterwards, on a thread of its
own so that it can never stall or break a transfer.
"""

import concurrent.futures
import errno
import hashlib
import logging
import os
import socket
import threading
import time

from dtn_migrate.transfer import admission
from dtn_migrate.transfer import auth
from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import handshake
from dtn_migrate.transfer import mounts
from dtn_migrate.transfer import paths
from dtn_migrate.transfer import progress
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.transport import tcp

LOG = logging.getLogger(__name__)

HASH_CHUNK = 4 << 20
# A file with all its objects written is synced within this delay rather
# than at once: files that complete together (small files) share one
# fdatasync batch and one BLOCK_SYNC, i.e. one object-log write.
COMPLETE_SYNC_DELAY = 0.01
# A sync batch touching at least this many files (written or installed)
# flushes the file system once (syncfs) rather than each file and
# directory: small files cost one journal commit per batch, not per file.
SYNCFS_MIN_FILES = 8
XATTR_SHA512 = "user.dtn_migrate.sha512"
# Beside <key>.part while that copy, created afresh, has had no object
# reported: a done set announced for it then is stale, and answered RESET.
UNCONFIRMED = ".new"
_local = threading.local()


def _scratch():
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = buffers.aligned(HASH_CHUNK)
    return buf


def _ranges(file_id, indices):
    """(file_id, first, count) triples covering sorted ``indices``."""
    out = []
    first = prev = None
    for i in indices:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if first is not None:
            out.append((file_id, first, prev - first + 1))
        first = prev = i
    if first is not None:
        out.append((file_id, first, prev - first + 1))
    return out


class TransferRecord(progress.Counters):
    """What the sink knows about one incoming transfer, across sessions,
    for as long as the agent runs (status, watermarks, statistics).
    """

    def __init__(self, transfer_hex, peer):
        super().__init__()
        self.transfer_id = transfer_hex
        self.peer = peer
        self.lock = self._lock
        self.epoch = 0
        self.sessions = 0
        self.active = False
        self.bytes_received = 0
        self.objects_received = 0
        self.objects_written = 0
        self.objects_duplicate = 0
        self.bytes_duplicate = 0
        self.objects_corrupt = 0
        self.files = {}      # name -> dict(size, durable, state, path)
        self.written = {}    # name -> Bitmap of objects ever written
        self.last_error = None
        self.updated = time.time()

    def note_written(self, name, nobjects, index, nbytes):
        with self.lock:
            seen = self.written.get(name)
            if seen is None or seen.nbits != nobjects:
                seen = self.written[name] = bitmap.Bitmap(nobjects)
            if seen.add(index):
                self.objects_written += 1
            else:
                self.objects_duplicate += 1
                self.bytes_duplicate += nbytes

    def set_file(self, name, **info):
        with self.lock:
            self.files.setdefault(name, {}).update(info)
            self.updated = time.time()

    def snapshot(self, with_files=True):
        with self.lock:
            d = {k: getattr(self, k) for k in (
                "transfer_id", "peer", "sessions", "active",
                "bytes_received", "objects_received", "objects_written",
                "objects_duplicate", "bytes_duplicate", "objects_corrupt",
                "last_error", "updated")}
            states = [f.get("state") for f in self.files.values()]
            d["files_total"] = len(states)
            d["files_done"] = states.count("done")
            d["files_failed"] = states.count("failed")
            if with_files:
                d["files"] = {n: dict(f) for n, f in self.files.items()}
            return d


class SinkFile:
    def __init__(self, msg, parts, key, fd, durable, hasher):
        self.file_id = msg.file_id
        self.name = msg.name
        self.parts = parts
        self.key = key                        # partial file base name
        self.size = msg.size
        self.mtime_ns = msg.mtime_ns
        self.mode = msg.mode & 0o777
        self.object_size = msg.object_size
        self.nobjects = msg.nobjects
        self.flags = P.FileFlags(msg.flags)
        self.verify = not self.flags & P.FileFlags.NO_SHA512
        self.expected = (msg.sha512 if self.flags & P.FileFlags.HAS_SHA512
                         else None)
        self.fd = fd
        self.durable = durable
        self.hasher = hasher
        self.last_ckpt = hasher.offset if hasher else 0
        self.state = "open"       # open, closing, done, mismatch, failed
        self.hashing = False
        self.rehash = False
        self.inflight = 0
        # Its name in the partial directory is not yet known durable.
        self.entry_durable = False
        # Created afresh, and no object of it reported yet (its mark,
        # <key>.new, is in the partial directory).
        self.unconfirmed = False

    @property
    def part(self):
        return self.key + ".part"

    @property
    def sidecar(self):
        return self.key + ".sha"

    def span(self, index):
        return P.object_span(index, self.size, self.object_size)

    def durable_prefix(self):
        return min(self.size, self.durable.prefix() * self.object_size)


class SinkServer:
    """Listens for sources and writes their files under ``root``."""

    def __init__(self, root, cfg, name, lookup_key, host="0.0.0.0", port=0,
                 tls_context=None, require_tls=None, rdma_device=None,
                 reports=None, on_incoming=None, owner=None,
                 on_session=None):
        """Callbacks, all optional:

        * ``owner(transfer_hex)``: the peer that sent the transfer, as
          recorded across restarts (None if unknown);
        * ``reports(transfer_hex, peer, attempt)``: the report bytes a
          REPORT connection receives (or None); ``attempt`` is the one
          the asker waits for (0: unspecified);
        * ``on_session(transfer_hex, peer, epoch)``: before a control
          session is acknowledged (an error is logged, the session goes
          on);
        * ``on_incoming(transfer_hex, peer, epoch)``: after, on the
          notification thread.
        """
        self.root = paths.StagingRoot(root) if isinstance(root, str) else root
        self.cfg = cfg
        self.name = name
        self.lookup_key = lookup_key
        self.tls_context = tls_context
        self.require_tls = require_tls or (lambda peer: False)
        self.rdma_device = rdma_device if cfg.transport != "tcp" else None
        self.host = host
        self.port = port
        self.lock = threading.RLock()
        self.sessions = {}        # (peer, transfer hex) -> SinkSession
        self.records = {}         # transfer hex -> TransferRecord
        self._sock = None
        self._threads = []
        self._stopping = threading.Event()
        self.admission = admission.Admission(
            cfg.max_connections, cfg.max_unauthenticated,
            cfg.max_unauthenticated_per_address, cfg.handshake_timeout)
        if self.rdma_device is not None:
            # The sink's buffers are READ targets only: peers may not
            # read them.
            self.pool = self.rdma_device.make_pool(
                cfg.pool_objects, cfg.object_size, remote_read=False)
        else:
            self.pool = None      # created per object size on demand
        self._pools = {}
        self.memory_fs = mounts.is_memory_fs(self.root.path)
        self.io = concurrent.futures.ThreadPoolExecutor(
            cfg.io_threads, thread_name_prefix="sink-io")
        self.hash_io = concurrent.futures.ThreadPoolExecutor(
            min(2, cfg.io_threads), thread_name_prefix="sink-hash")
        self.reports = reports
        self.on_incoming = on_incoming
        self.owner = owner
        self.on_session = on_session
        # One thread, in order: a slow or hung callback delays only the
        # notifications after it, never a session.
        self.notify = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="sink-notify")

    # Lifecycle.
    def start(self):
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self.admission.start()
        t = threading.Thread(target=self._accept_loop, name="sink-accept",
                             daemon=True)
        t.start()
        self._threads.append(t)
        LOG.info("sink %s listening on %s:%d, staging root %s", self.name,
                 self.host, self.port, self.root.path)
        return self

    @property
    def address(self):
        return self.host, self.port

    def stop(self):
        self._stopping.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        self.admission.stop()
        with self.lock:
            sessions = list(self.sessions.values())
        for s in sessions:
            s.close("agent stopping")
        self.io.shutdown(wait=True)
        self.hash_io.shutdown(wait=True)
        self.notify.shutdown(wait=False)

    def pool_for(self, object_size):
        """The buffer pool for sessions of ``object_size``.

        With an RDMA device every pool is registered (not remotely
        readable), so that an RDMA session may use it whatever its object
        size; its buffers are then a power of two, so that at most a few
        pools are ever pinned.
        """
        if self.pool is not None and object_size <= self.pool.size:
            return self.pool
        if self.rdma_device is not None:
            object_size = 1 << (object_size - 1).bit_length()
        with self.lock:
            pool = self._pools.get(object_size)
            if pool is None:
                count = max(2, self.cfg.buffer_pool_bytes // object_size)
                if self.rdma_device is not None:
                    pool = self.rdma_device.make_pool(count, object_size,
                                                      remote_read=False)
                else:
                    pool = buffers.BufferPool(count, object_size)
                self._pools[object_size] = pool
            return pool

    # Status.
    def status(self, transfer_id=None, with_files=True):
        with self.lock:
            records = dict(self.records)
        if transfer_id is not None:
            rec = records.get(transfer_id)
            return rec.snapshot(with_files) if rec else None
        return [r.snapshot(with_files=False) for r in records.values()]

    def watermark(self, transfer_id, name):
        """Contiguous durable prefix of an incoming file, and where to
        read it (the partial copy until it completes).
        """
        with self.lock:
            rec = self.records.get(transfer_id)
        if rec is None:
            return None
        with rec.lock:
            info = rec.files.get(name)
            return dict(info) if info else None

    # Connections.
    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                sock, addr = self._sock.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                time.sleep(0.05)
                continue
            ticket, why = self.admission.admit(sock, addr[0])
            if ticket is None:
                LOG.warning("sink %s: refused a connection from %s: %s",
                            self.name, addr[0], why)
                sock.close()
                continue
            try:
                threading.Thread(target=self._handle,
                                 args=(sock, addr, ticket), name="sink-conn",
                                 daemon=True).start()
            except RuntimeError:      # no thread to be had
                self.admission.release(ticket)
                sock.close()

    def _handle(self, sock, addr, ticket):
        try:
            self._serve(sock, addr, ticket)
        finally:
            self.admission.release(ticket)

    def _serve(self, sock, addr, ticket):
        cfg = self.cfg
        try:
            # The deadline is the admission watchdog's; a read timeout
            # is only a backstop.
            conn = stream.accept(sock, addr, cfg.socket_buffer_bytes,
                                 cfg.tcp_user_timeout, self.tls_context,
                                 2 * cfg.handshake_timeout)
        except (errors.TransferError, ConnectionError) as exc:
            LOG.warning("sink %s: rejected connection from %s: %s",
                        self.name, addr[0], exc)
            return
        try:
            connect, key = handshake.server(conn, self.lookup_key,
                                            cfg.frame_auth)
            self.admission.authenticated(ticket)
            if self.require_tls(connect.peer) and not conn.tls:
                conn.send(P.Error(errors.Code.AUTH, 1, P.NO_FILE,
                                  "this sink requires TLS from %s"
                                  % connect.peer))
                raise errors.AuthenticationError(
                    "%s (peer %s) connected without TLS, which its "
                    "peering requires" % (conn.peer, connect.peer))
            if connect.role == P.Role.REPORT:
                self._report(conn, connect)
                return
            conn.settimeout(None)
            if connect.role == P.Role.CONTROL:
                self._control(conn, connect)
            else:
                self._data(conn, connect)
        except errors.AuthenticationError as exc:
            LOG.warning("sink %s: %s; connection dropped", self.name, exc)
        except errors.ProtocolError as exc:
            LOG.warning("sink %s: closing connection from %s: %s",
                        self.name, conn.peer, exc)
            try:
                conn.send(P.Error(exc.code, 1, P.NO_FILE, str(exc)[:1000]))
            except (ConnectionError, errors.TransferError):
                pass
        except (ConnectionError, OSError) as exc:
            LOG.info("sink %s: connection from %s ended: %s", self.name,
                     conn.peer, exc)
        finally:
            conn.close()

    def _owner(self, tid):
        """The peer that sent transfer ``tid``: the one of this run, or
        the recorded one.  Raises ProtocolError if it cannot be known.
        """
        with self.lock:
            rec = self.records.get(tid)
        if rec is not None:
            return rec.peer
        if self.owner is None:
            return None
        try:
            return self.owner(tid)
        except Exception:  # noqa: B902 - refused rather than guessed
            LOG.exception("sink %s: owner lookup of transfer %s failed",
                          self.name, tid)
            raise errors.ProtocolError("cannot tell who owns transfer %s"
                                       % tid, code=errors.Code.INTERNAL)

    @staticmethod
    def _check_owner(tid, peer, owner):
        if owner is not None and owner != peer:
            raise errors.ProtocolError(
                "transfer %s belongs to another peer" % tid,
                code=errors.Code.AUTH)

    def _control(self, conn, connect):
        tid = connect.transfer_id.hex()
        key = (connect.peer, tid)
        self._check_owner(tid, connect.peer, self._owner(tid))
        with self.lock:
            rec = self.records.get(tid)
            # Checked again: another peer's session may have begun.
            self._check_owner(tid, connect.peer, rec and rec.peer)
            old = self.sessions.get(key)
        if old is not None:
            LOG.info("sink %s: transfer %s reconnected; closing its "
                     "previous session", self.name, tid)
            old.close("replaced by a new connection")
        with self.lock:
            if len(self.sessions) >= self.cfg.max_sessions:
                raise errors.ProtocolError(
                    "sink %s is at its limit of %d sessions"
                    % (self.name, self.cfg.max_sessions),
                    code=errors.Code.LIMIT)
            rec = self.records.setdefault(tid, TransferRecord(tid,
                                                              connect.peer))
            rec.epoch += 1
            rec.sessions += 1
            rec.active = True
            if connect.caps & P.Caps.RDMA and self.rdma_device is not None:
                plane = self.rdma_device.sink_plane(
                    self.pool_for(connect.object_size))
            else:
                plane = tcp.TcpSinkPlane()
            session = SinkSession(self, connect, conn, rec.epoch, plane, rec)
            self.sessions[key] = session
        if self.on_session is not None:
            try:
                self.on_session(tid, connect.peer, session.epoch)
            except Exception:  # noqa: B902 - the transfer goes on
                LOG.exception("sink %s: session callback failed for "
                              "transfer %s from %s", self.name, tid,
                              connect.peer)
        conn.send(P.ConnectAck(rec.epoch, connect.object_size,
                               connect.streams, P.MAX_OBJECTS,
                               plane.kind, self.name))
        LOG.info("sink %s: transfer %s from %s: session %d (%s, %d "
                 "streams, %d-byte objects)", self.name, tid, connect.peer,
                 rec.epoch, P.DataPlane(plane.kind).name, connect.streams,
                 connect.object_size)
        self._notify_incoming(tid, connect.peer, session.epoch)
        session.run_control()

    def _notify_incoming(self, tid, peer, epoch):
        if self.on_incoming is not None:
            self.defer(self.on_incoming, tid, peer, epoch)

    def defer(self, func, *args):
        """Call ``func(*args)`` on the notification thread, after the
        calls deferred before it; its errors are logged.
        """
        try:
            self.notify.submit(self._call_quietly, func, args)
        except RuntimeError:     # executor shut down: agent stopping
            pass

    def _call_quietly(self, func, args):
        try:
            func(*args)
        except Exception:  # noqa: B902 - a callback never breaks the sink
            LOG.exception("sink %s: notification %s%r failed", self.name,
                          getattr(func, "__name__", func), args)

    def _report(self, conn, connect):
        """Answer a REPORT connection with the transfer's report, if
        this peer may read it; no session or record is created.
        """
        tid = connect.transfer_id.hex()
        body = None
        owner = self._owner(tid)
        if owner is not None and owner != connect.peer:
            LOG.warning("sink %s: %s asked for the report of transfer %s, "
                        "which %s sent; refused", self.name, connect.peer,
                        tid, owner)
        elif self.reports is not None:
            try:
                body = self.reports(tid, connect.peer, connect.epoch)
            except Exception:  # noqa: B902 - answered as "no report"
                LOG.exception("sink %s: report lookup for transfer %s "
                              "failed", self.name, tid)
            if body is not None and (not isinstance(body, bytes) or
                                     len(body) > P.MAX_REPORT):
                LOG.error("sink %s: report of transfer %s is not bytes of "
                          "at most %d; not sent", self.name, tid,
                          P.MAX_REPORT)
                body = None
        conn.send(P.ConnectAck(0, connect.object_size, 1, 0,
                               P.DataPlane.TCP, self.name))
        conn.send(P.Report(1, body) if body is not None else P.Report(0))
        LOG.debug("sink %s: report of transfer %s for %s: %s", self.name,
                  tid, connect.peer, "sent" if body is not None else "none")

    def _data(self, conn, connect):
        key = (connect.peer, connect.transfer_id.hex())
        with self.lock:
            session = self.sessions.get(key)
        if session is None or session.epoch != connect.epoch or \
                session.closed:
            raise errors.ProtocolError(
                "data stream for a session that is gone",
                code=errors.Code.UNKNOWN_SESSION)
        if connect.streams != session.streams or \
                connect.object_size != session.object_size:
            raise errors.BoundsError("data stream disagrees with its "
                                     "session's parameters")
        remote = session.plane.accept(connect.stream, connect.rdma)
        conn.send(P.ConnectAck(session.epoch, session.object_size,
                               session.streams, P.MAX_OBJECTS,
                               session.plane.kind, self.name, remote))
        session.run_data(conn, connect.stream)

    def forget(self, session):
        with self.lock:
            key = (session.peer, session.transfer_id)
            if self.sessions.get(key) is session:
                del self.sessions[key]
                session.record.active = False


class SinkSession:
    """One connected source: its control and data connections, open
    files, pending durability batch and hashers.
    """

    def __init__(self, server, connect, conn, epoch, plane, record):
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
        self.pdir = self.root.partial_dir(self.transfer_id)
        self.pdir_durable = False
        # On tmpfs, fallocate would only zero-fill memory that the objects
        # overwrite anyway (0.3 s per GiB here): space is checked instead.
        self.preallocate = server.cfg.preallocate and \
            not server.memory_fs
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
        with self.lock:
            held = sum(1 for f in self.files.values()
                       if f.state in ("open", "closing") and
                       f.file_id != msg.file_id)
        if held >= self.cfg.max_open_files:
            return self._refuse(msg, errors.TransferError(
                "%s: the session already holds %d open files, the sink's "
                "limit" % (msg.name, held), errors.Code.LIMIT))
        return None

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
        LOG.warning("sink: transfer %s: refusing %r: %s", self.transfer_id,
                    msg.name, exc)
        self.record.set_file(msg.name, size=msg.size, state="failed",
                             error=str(exc))
        self.retired.add(msg.file_id)
        return P.FileId(msg.file_id, P.FileStatus.REFUSED, exc.code,
                        str(exc)[:1000])

    def _open_file(self, msg):
        try:
            parts = paths.check_name(msg.name)
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
                self.record.set_file(msg.name, size=msg.size, state="done",
                                     durable=msg.size,
                                     path=os.path.join(self.root.path,
                                                       msg.name))
                return P.FileId(msg.file_id, P.FileStatus.SKIP)
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
                    return os.getxattr(fd, XATTR_SHA512) == \
                        msg.sha512.hex().encode()
                except OSError:
                    return False
            return st.st_mtime_ns == msg.mtime_ns
        finally:
            os.close(fd)

    def _prepare(self, msg, parts, flags):
        """Open (or create) the partial copy; return (SinkFile, status)."""
        key = hashlib.sha256(msg.name.encode("utf-8")).hexdigest()[:40]
        part = key + ".part"
        done = bitmap.Bitmap.decode_runs(msg.done, msg.nobjects)
        try:
            st = os.stat(part, dir_fd=self.pdir, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        fresh = flags & P.FileFlags.RESTART or not len(done) or \
            st is None or st.st_size != msg.size or \
            self._exists(key + UNCONFIRMED)
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
            os.close(os.open(key + UNCONFIRMED, os.O_WRONLY | os.O_CREAT |
                             os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=self.pdir))
            fd = self._create(part, msg, st)
            done = bitmap.Bitmap(msg.nobjects)
            hasher = checksum.ResumableSha512()
        else:
            fd = os.open(part, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=self.pdir)
            hasher = self._load_hash(key + ".sha", done, msg)
        if flags & P.FileFlags.NO_SHA512:
            hasher = None
        f = SinkFile(msg, parts, key, fd, done, hasher)
        f.unconfirmed = bool(fresh)
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
                self._unlink(f.key + UNCONFIRMED)
                f.unconfirmed = False

    def _create(self, part, msg, st):
        vfs = os.statvfs(self.pdir)
        free = vfs.f_bavail * vfs.f_frsize
        if st is not None:
            free += st.st_blocks * 512
        need = msg.size + self.cfg.min_free_bytes
        if need > free:
            raise errors.NoSpaceError(
                "not enough space for %s: needs %d bytes (+%d reserve), "
                "%d free" % (msg.name, msg.size, self.cfg.min_free_bytes,
                             free))
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC |
                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.pdir)
        try:
            if self.preallocate and msg.size:
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
        if f.fd is not None:
            os.close(f.fd)
            f.fd = None

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

    # Data connections.
    def run_data(self, conn, index):
        with self.lock:
            if self.closed:
                return
            if index in self.data:
                raise errors.ProtocolError("data stream %d opened twice"
                                           % index)
            self.data[index] = conn
        try:
            self._receive(conn, index)
        except errors.ProtocolError as exc:
            LOG.warning("sink: transfer %s, data stream %d from %s: %s; "
                        "closing that connection", self.transfer_id, index,
                        conn.peer, exc)
            self.record.last_error = str(exc)
            self.outbox.post(P.Error(exc.code, 0, P.NO_FILE,
                                     ("data stream %d: %s" % (index, exc))
                                     [:1000]))
        except (ConnectionError, OSError):
            pass
        finally:
            with self.lock:
                if self.data.get(index) is conn:
                    del self.data[index]
                self.cond.notify_all()
            self.plane.release_stream(index)

    def _receive(self, conn, index):
        while not self.closed:
            msg = conn.recv(expect=(P.MsgType.NEW_BLOCK,),
                            refuse="data streams carry only NEW_BLOCK, got %s")
            if msg.length > self.object_size:
                raise errors.BoundsError(
                    "object of %d bytes exceeds the session's object size "
                    "%d" % (msg.length, self.object_size))
            f = self.files.get(msg.file_id)
            if f is None or f.state != "open":
                if f is None and msg.file_id not in self.retired:
                    raise errors.ProtocolError(
                        "object for file %d, which was never announced"
                        % msg.file_id)
                # A file that just finished or failed: discard the bytes.
                self.plane.discard(conn, index, msg)
                if self.plane.acks_pull:
                    conn.send(P.BlockPulled(msg.file_id, msg.index))
                continue
            if msg.index >= f.nobjects:
                raise errors.BoundsError(
                    "object index %d beyond the %d objects of %s"
                    % (msg.index, f.nobjects, f.name))
            offset, length = f.span(msg.index)
            if msg.offset != offset or msg.length != length:
                raise errors.BoundsError(
                    "object %d of %s claims offset %d length %d; expected "
                    "offset %d length %d" % (msg.index, f.name, msg.offset,
                                             msg.length, offset, length))
            buf = None
            while buf is None:
                if self.closed:
                    return
                buf = self.pool.acquire(timeout=0.5)
            mac = auth.object_mac(self.object_key, msg.file_id, msg.index,
                                  offset, length)
            try:
                damage = self._receive_object(conn, index, msg, buf, mac)
            except BaseException:
                self.pool.release(buf)
                raise
            if damage is not None:
                self.pool.release(buf)
                self.record.add(objects_corrupt=1)
                LOG.warning("sink: transfer %s: object %d of %s failed its "
                            "%s; asking for it again", self.transfer_id,
                            msg.index, f.name, damage[1])
                self.outbox.post(P.BlockNack(msg.file_id, msg.index,
                                             damage[0]))
                continue
            with self.lock:
                f.inflight += 1
                self.tasks += 1
            try:
                self.server.io.submit(self._write, f, msg.index, offset, buf,
                                      length)
            except RuntimeError:     # executor shut down: agent stopping
                self._task_done(f)
                self.pool.release(buf)
                return

    def _receive_object(self, conn, index, msg, buf, mac):
        """Receive one object into ``buf``, checking its xxh3 and, with
        frame authentication, its keyed digest (in the same pass over
        TCP).  None, or (code, what failed).
        """
        length = msg.length
        if mac is not None and getattr(self.plane, "hashes_mac", False):
            digest = self.plane.receive(conn, index, msg, buf, mac)
        else:
            digest = self.plane.receive(conn, index, msg, buf)
            if mac is not None:
                mac.update(buf.view[:length])
        if self.plane.acks_pull:
            conn.send(P.BlockPulled(msg.file_id, msg.index))
        self.record.add(bytes_received=length, objects_received=1)
        if digest is None:
            digest = checksum.xxh3(buf.view[:length])
        if digest != msg.xxh3:
            return errors.Code.CHECKSUM, "checksum"
        if mac is not None and not auth.verify(auth.object_tag(mac),
                                               msg.mac):
            return errors.Code.INTEGRITY, "authentication tag"
        return None

    def _task_done(self, f=None):
        with self.lock:
            self.tasks -= 1
            if f is not None:
                f.inflight -= 1
            self.cond.notify_all()

    def _write(self, f, index, offset, buf, length):
        error = None
        try:
            view = buf.view
            done = 0
            while done < length:
                done += os.pwrite(f.fd, view[done:length], offset + done)
        except OSError as exc:
            error = exc
        finally:
            self.pool.release(buf)
        with self.lock:
            current = f.state == "open" and self.files.get(f.file_id) is f
            if current and error is None:
                pending = self.pending.setdefault(f, [])
                pending.append(index)
                self.pending_bytes += length
                # Sync soon when a file has all its objects: nothing
                # more is coming for it, and its verification waits.
                if self.pending_bytes >= self.cfg.sync_bytes:
                    self._sync_within(0)
                elif len(f.durable) + len(pending) >= f.nobjects:
                    self._sync_within(COMPLETE_SYNC_DELAY)
        self._task_done(f)
        if error is not None and current:
            self._fail(f, error)
        elif current:
            self.record.note_written(f.name, f.nobjects, index, length)

    def _fail(self, f, exc, code=None):
        if code is None:
            code = errors.Code.NO_SPACE if getattr(exc, "errno", None) in (
                errno.ENOSPC, errno.EDQUOT) else errors.Code.IO
        with self.lock:
            if f.state not in ("open", "closing"):
                return
            f.state = "failed"
            self.retired.add(f.file_id)
        message = "%s: %s" % (f.name, getattr(exc, "strerror", None) or exc)
        LOG.error("sink: transfer %s: file failed: %s", self.transfer_id,
                  message)
        self.record.set_file(f.name, state="failed", error=message)
        self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.FAILED, code,
                                     f.size, bytes(64), message[:1000]))

    # Durability.
    def _sync_within(self, delay):
        """Have the syncer run at most ``delay`` seconds from now (lock
        held).
        """
        due = time.monotonic() + delay
        if self.sync_due is None or due < self.sync_due:
            self.sync_due = due
            self.cond.notify_all()

    def _sync_loop(self):
        cfg = self.cfg
        while True:
            with self.cond:
                deadline = time.monotonic() + cfg.sync_interval
                while not self.closed:
                    due = deadline if self.sync_due is None else \
                        min(deadline, self.sync_due)
                    remaining = due - time.monotonic()
                    if remaining <= 0:
                        break
                    self.cond.wait(remaining)
                if self.closed:
                    return
                self.sync_due = None
            try:
                self._sync_now()
            except Exception:  # noqa: B902 - keep the syncer alive
                LOG.exception("sink: transfer %s: sync failed",
                              self.transfer_id)

    def _sync_now(self):
        """Make pending writes and installed files durable, then tell the
        source (BLOCK_SYNC, FILE_CLOSE).
        """
        with self.sync_lock:
            with self.lock:
                batch, self.pending = self.pending, {}
                self.pending_bytes = 0
                installs, self.installed = self.installed, []
            live = [(f, i) for f, i in batch.items() if f.fd is not None]
            self._confirm([f for f, _ in live])
            whole = len(live) + len(installs) >= SYNCFS_MIN_FILES and \
                self._syncfs()
            if whole:
                synced = live
                for f, _ in live:
                    f.entry_durable = True
                self.pdir_durable = True
            else:
                synced = self._datasync(live)
            triples = []
            grew = []
            with self.lock:
                for f, indices in synced:
                    if f.state != "open" or self.files.get(f.file_id) is not f:
                        continue
                    indices.sort()
                    for i in indices:
                        f.durable.add(i)
                    triples.extend(_ranges(f.file_id, indices))
                    grew.append(f)
            if triples:
                self.outbox.post(P.BlockSync.from_ranges(triples))
            for f in grew:
                self.record.set_file(f.name, durable=f.durable_prefix())
                self._after_durable(f)
            self._confirm_installed(installs, dirs_durable=whole)

    def _syncfs(self):
        try:
            mounts.syncfs(self.pdir)
            return True
        except OSError as exc:
            # Fall back to per-file syncs, which say which file failed.
            LOG.warning("sink: transfer %s: syncfs failed (%s); syncing "
                        "file by file", self.transfer_id, exc)
            return False

    def _datasync(self, live):
        """fdatasync each file of the batch, then make the names of new
        partial copies durable (see the power-loss model in
        doc/source/architecture.rst); returns the files synced.
        """
        synced = []
        for f, indices in live:
            try:
                if self._sync_file(f):
                    synced.append((f, indices))
            except OSError as exc:
                self._fail(f, exc)
        fresh = [(f, i) for f, i in synced if not f.entry_durable]
        if not fresh:
            return synced
        try:
            self._sync_partial_dir()
        except OSError as exc:
            for f, _ in fresh:
                self._fail(f, exc)
            return [(f, i) for f, i in synced if f.entry_durable]
        for f, _ in fresh:
            f.entry_durable = True
        return synced

    def _sync_file(self, f):
        """fdatasync one file (fsync the first time: its inode is new).

        A RESTART may close the file meanwhile: its descriptor is taken
        under the lock and duplicated, so the sync never sees a closed
        or reused one.  False if the file was closed already.
        """
        with self.lock:
            if f.fd is None:
                return False
            fd = os.dup(f.fd)
        try:
            (os.fdatasync if f.entry_durable else os.fsync)(fd)
        finally:
            os.close(fd)
        return True

    def _sync_partial_dir(self):
        """fsync the partial directory (new entries in it), and the
        first time also the directories above it, up to the root.
        """
        os.fsync(self.pdir)
        if self.pdir_durable:
            return
        for parts in ([paths.PARTIAL_DIR, ""], [""]):
            dfd = self.root.open_dir(parts, create=False)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self.pdir_durable = True

    def _after_durable(self, f):
        if f.hasher is None:
            self._maybe_finalize(f)
            return
        with self.lock:
            if f.hashing:
                f.rehash = True
                return
            if f.hasher.offset >= f.durable_prefix() and not f.durable.full:
                return
            f.hashing = True
            self.tasks += 1
        try:
            self.server.hash_io.submit(self._hash, f)
        except RuntimeError:
            with self.lock:
                f.hashing = False
            self._task_done()

    def _hash(self, f):
        try:
            view = _scratch()
            while True:
                target = f.durable_prefix()
                while f.hasher.offset < target and f.state == "open" and \
                        not self.closed:
                    want = min(HASH_CHUNK, target - f.hasher.offset)
                    n = os.preadv(f.fd, [view[:want]], f.hasher.offset)
                    if n <= 0:
                        raise OSError(errno.EIO, "partial copy is short")
                    f.hasher.update(view[:n])
                    if f.hasher.offset - f.last_ckpt >= \
                            self.cfg.hash_checkpoint_bytes:
                        self._save_hash(f)
                with self.lock:
                    if f.rehash and f.state == "open" and not self.closed:
                        f.rehash = False
                        continue
                    f.hashing = False
                    break
        except OSError as exc:
            with self.lock:
                f.hashing = False
            self._fail(f, exc)
        finally:
            self._task_done()
        self._maybe_finalize(f)

    def _save_hash(self, f):
        blob = f.hasher.save()
        if blob is None:
            return
        tmp = f.sidecar + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                     os.O_NOFOLLOW, 0o600, dir_fd=self.pdir)
        try:
            os.write(fd, blob)
            # Durable before its name: a rename that outlives a power cut
            # must never name an empty or torn checkpoint.
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, f.sidecar, src_dir_fd=self.pdir, dst_dir_fd=self.pdir)
        f.last_ckpt = f.hasher.offset

    def _maybe_finalize(self, f):
        with self.lock:
            if f.state != "open" or not f.durable.full:
                return
            if f.hasher is not None and (f.hashing or f.expected is None or
                                         f.hasher.offset < f.size):
                return
            f.state = "closing"
        digest = f.hasher.digest() if f.hasher is not None else bytes(64)
        if f.hasher is not None and digest != f.expected:
            with self.lock:
                f.state = "mismatch"
            message = ("sha512 of the received %s is %s..., the source "
                       "declared %s..." % (f.name, digest.hex()[:16],
                                           f.expected.hex()[:16]))
            LOG.error("sink: transfer %s: %s", self.transfer_id, message)
            self.record.set_file(f.name, state="mismatch", error=message)
            self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.MISMATCH,
                                         errors.Code.HASH_MISMATCH, f.size,
                                         digest, message))
            return
        try:
            final = self._install(f, digest)
        except (OSError, errors.TransferError) as exc:
            with self.lock:
                f.state = "open"
            self._fail(f, exc, getattr(exc, "code", None))
            return
        # Readers following the file find it under its new name at once;
        # it is reported complete only once its entry is durable.
        self.record.set_file(f.name, path=final)
        # Its directory entry becomes durable with the next sync batch
        # (one directory fsync for all files installed meanwhile); only
        # then is the file reported complete.
        with self.lock:
            self.installed.append((f, digest, final))
            self._sync_within(COMPLETE_SYNC_DELAY)

    def _confirm_installed(self, batch, dirs_durable=False):
        """Make the directory entries of installed files durable (unless a
        syncfs already did), then report the files complete.
        """
        failed = {}
        if not dirs_durable:
            # Every directory on the way too: _install may have made some.
            keys = {tuple(f.parts[:-1]) for f, _, _ in batch}
            for key in sorted({k[:n] for k in keys
                               for n in range(len(k) + 1)}):
                try:
                    dfd = self.root.open_dir(list(key) + [""], create=False)
                    try:
                        os.fsync(dfd)
                    finally:
                        os.close(dfd)
                except (OSError, errors.TransferError) as exc:
                    failed[key] = exc
        for f, digest, final in batch:
            key = tuple(f.parts[:-1])
            exc = next((failed[key[:n]] for n in range(len(key) + 1)
                        if key[:n] in failed), None)
            if exc is not None:
                self._fail(f, exc, getattr(exc, "code", None))
                continue
            with self.lock:
                f.state = "done"
                self.files.pop(f.file_id, None)
                self.retired.add(f.file_id)
            self.record.set_file(f.name, state="done", durable=f.size,
                                 path=final)
            self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.OK, 0,
                                         f.size, digest))

    def _install(self, f, digest):
        """Give the verified partial copy its final name and metadata."""
        os.fchmod(f.fd, f.mode or 0o644)
        if f.mtime_ns:
            os.utime(f.fd, ns=(f.mtime_ns, f.mtime_ns))
        if f.hasher is not None:
            try:
                os.setxattr(f.fd, XATTR_SHA512, digest.hex().encode())
            except OSError:
                pass
        dfd = self.root.open_dir(f.parts, create=True)
        try:
            try:
                os.rename(f.part, f.parts[-1], src_dir_fd=self.pdir,
                          dst_dir_fd=dfd)
            except IsADirectoryError:
                raise errors.BadNameError("%s exists as a directory" % f.name)
        finally:
            os.close(dfd)
        self._close_file(f)
        self._unlink(f.sidecar)
        self._confirm([f])
        return os.path.join(self.root.path, f.name)

    # Teardown.
    def close(self, reason):
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
            conns = list(self.data.values())
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
            if f.hasher is not None and f.fd is not None and \
                    f.hasher.offset > f.last_ckpt:
                try:
                    self._save_hash(f)
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
