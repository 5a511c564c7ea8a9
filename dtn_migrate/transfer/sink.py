"""Sink side: accept transfers from authenticated peers into a staging root.

``SinkServer`` listens on one port.  Each connection authenticates
(see ``auth``) and is either a session's control connection or one of
its data streams.  For every announced file the sink creates a partial
copy under ``<root>/.dtn-partial/<transfer>/``, sized by ftruncate
(preallocated only for files of PREALLOCATE_MIN or more in sessions
without zero extents); objects are checked (bounds, then xxh3) and
written at their offsets by the shared I/O threads, zero extents left
as holes (``sinkrecv``); the file's contiguous-prefix sha512 is fed from
the buffers the objects arrived in, in order, and saves its state next
to the partial copy, so neither a reconnect nor a restart re-reads what
was already hashed (``sinkhash``); a per-session syncer makes batches
durable and only then reports them with BLOCK_SYNC (``sinksync``).
When every object is durable and the hash matches the source's, the
copy is renamed to its final name.  The session's optional
capabilities (zero extents, zstd objects) are answered in CONNECT_ACK.

Malformed input closes only the connection that carried it; sessions of
other transfers, the partial copies and the source's log are untouched.

A transfer belongs to the peer that first sent it: ``owner`` looks up
who that was across restarts, and any other peer is refused.  A REPORT
connection only fetches the import report the sink's side stored for a
transfer (``reports``), given only to that owner; it creates no session
or record.  A REQUEST connection carries one request to this sink's
side (``requests``) and its answer (see ``request``); no session or
record either.  ``on_session`` records every control session before it
is acknowledged; ``on_incoming`` hears of it afterwards, on a thread of
its own so that it can never stall or break a transfer.
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
from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import direct
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import handshake
from dtn_migrate.transfer import mounts
from dtn_migrate.transfer import paths
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer import report as report_mod
from dtn_migrate.transfer import request as request_mod
from dtn_migrate.transfer import sinkfile
from dtn_migrate.transfer import sinkhash
from dtn_migrate.transfer import sinkrecv
from dtn_migrate.transfer import sinksync
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.transport import tcp

LOG = logging.getLogger(__name__)

# Kept importable from here.
HASH_CHUNK = sinkhash.HASH_CHUNK
COMPLETE_SYNC_DELAY = sinkrecv.COMPLETE_SYNC_DELAY
SYNCFS_MIN_FILES = sinksync.SYNCFS_MIN_FILES
XATTR_SHA512 = sinkfile.XATTR_SHA512
UNCONFIRMED = sinkfile.UNCONFIRMED
TransferRecord = sinkfile.TransferRecord
SinkFile = sinkfile.SinkFile
_ranges = sinkfile.ranges
_scratch = sinkhash.scratch
# Files smaller than this are not preallocated: a fallocate costs more
# than it saves for them (many small files).
PREALLOCATE_MIN = 4 << 20
#: accept() errors after which the listening socket is no more.
_LISTENER_GONE = frozenset((errno.EBADF, errno.EINVAL, errno.ENOTSOCK))


class SinkServer:
    """Listens for sources and writes their files under ``root``."""

    def __init__(self, root, cfg, name, lookup_key, host="0.0.0.0", port=0,
                 tls_context=None, require_tls=None, rdma_device=None,
                 reports=None, on_incoming=None, owner=None,
                 on_session=None, listener=None, requests=None):
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
          notification thread;
        * ``listener(transfer_hex, name)``: whenever what ``watermark``
          returns for that file may have changed (its durable prefix
          advanced, its state changed); called with no sink lock held,
          it must not block;
        * ``requests(peer, body)``: the answer (bytes of at most
          MAX_REPORT) to a REQUEST connection's request (bytes), called
          on the connection's thread; a ``request.RequestFailed`` or
          ValueError is sent to the peer as an ERROR with its message,
          any other exception with a generic one.  None: this sink takes
          no requests.
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
        self.listener = listener
        self.requests = requests
        # The optional capabilities this sink accepts (Caps).
        self.accept_caps = P.Caps.ZERO_EXTENTS | (
            P.Caps.ZSTD if sinkrecv.zstd_available() else P.Caps.NONE)
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
        trouble = admission.AcceptTrouble(self.name)
        while not self._stopping.is_set():
            try:
                sock, addr = self._sock.accept()
            except OSError as exc:
                if self._stopping.is_set():
                    return
                if exc.errno in _LISTENER_GONE:
                    # Trying again would spin: nothing mends a closed
                    # or shut down socket.
                    LOG.error("sink %s: its listening socket is gone (%s); "
                              "it accepts no more connections", self.name,
                              exc)
                    return
                # Out of descriptors or memory, say: that may mend.
                self._stopping.wait(trouble.failed(exc))
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
            except RuntimeError as exc:     # no thread to be had
                self.admission.release(ticket)
                sock.close()
                self._stopping.wait(trouble.failed(
                    "no thread for a connection from %s (%s)"
                    % (addr[0], exc)))
            else:
                trouble.mended()

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
            if connect.role == P.Role.REQUEST:
                self._request(conn, connect)
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
            rec = self.records.get(tid)
            if rec is None:
                rec = self.records[tid] = TransferRecord(
                    tid, connect.peer, self.listener)
            rec.epoch += 1
            rec.sessions += 1
            rec.active = True
            if connect.caps & P.Caps.RDMA and self.rdma_device is not None:
                plane = self.rdma_device.sink_plane(
                    self.pool_for(connect.object_size))
            else:
                plane = tcp.TcpSinkPlane()
            caps = connect.caps & self.accept_caps & (
                P.Caps.ZERO_EXTENTS | P.Caps.ZSTD)
            if plane.kind != P.DataPlane.TCP:
                caps &= ~P.Caps.ZSTD
            session = SinkSession(self, connect, conn, rec.epoch, plane, rec,
                                  caps)
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
                               plane.kind, self.name, b"", int(caps)))
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
        this peer may read it; no session or record is created.  With a
        report lookup that tells changes (``report.ReportFeed``), the
        connection stays open and carries each new report (a report
        channel) until the asker closes it.
        """
        tid = connect.transfer_id.hex()
        feed = self.reports if getattr(self.reports, "wait", None) \
            else None
        # Before the lookup: a change during it is sent next.
        version = feed.version(tid) if feed is not None else 0
        body = self._report_body(conn, connect, tid)
        conn.send(P.ConnectAck(0, connect.object_size, 1, 0,
                               P.DataPlane.TCP, self.name))
        conn.send(P.Report(1, body) if body is not None else P.Report(0))
        LOG.debug("sink %s: report of transfer %s for %s: %s", self.name,
                  tid, connect.peer, "sent" if body is not None else "none")
        if feed is not None:
            report_mod.serve_updates(
                conn, tid, body,
                lambda: self._report_body(conn, connect, tid),
                feed, self._stopping, version=version)

    def _report_body(self, conn, connect, tid):
        """The report bytes ``connect.peer`` may read, or None."""
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
        return body

    def _request(self, conn, connect):
        """Answer a REQUEST connection: read its one request (within
        ``handshake_timeout`` in all), hand it to ``requests`` and send
        the answer, or a fatal ERROR.  No session or record is created.
        """
        conn.send(P.ConnectAck(0, connect.object_size, 1, 0,
                               P.DataPlane.TCP, self.name))
        msg = request_mod.recv_within(conn, (P.MsgType.REPORT,),
                                      self.cfg.handshake_timeout)
        try:
            answer = self._answer(connect.peer, msg)
        except request_mod.RequestFailed as exc:
            conn.send(P.Error(exc.code, 1, P.NO_FILE, str(exc)[:1000]))
            return
        conn.send(P.Report(1, answer))

    def _answer(self, peer, msg):
        """The answer to ``peer``'s request ``msg`` (a Report), or
        RequestFailed.
        """
        if self.requests is None:
            raise request_mod.RequestFailed("this DTN takes no requests",
                                            errors.Code.PROTOCOL)
        if not msg.found or not msg.body:
            raise request_mod.RequestFailed("a request has a body",
                                            errors.Code.PROTOCOL)
        try:
            answer = self.requests(peer, msg.body)
        except request_mod.RequestFailed as exc:
            LOG.warning("sink %s: request from %s refused: %s", self.name,
                        peer, exc)
            raise
        except ValueError as exc:
            LOG.warning("sink %s: bad request from %s: %s", self.name,
                        peer, exc)
            raise request_mod.RequestFailed(str(exc), errors.Code.PROTOCOL)
        except Exception:  # noqa: B902 - answered, never a traceback
            LOG.exception("sink %s: request from %s failed", self.name,
                          peer)
            raise request_mod.RequestFailed(
                "the request failed on %s" % self.name)
        if not isinstance(answer, bytes) or len(answer) > P.MAX_REPORT:
            LOG.error("sink %s: the answer to a request from %s is not "
                      "bytes of at most %d", self.name, peer, P.MAX_REPORT)
            raise request_mod.RequestFailed(
                "the answer to the request is not bytes of at most %d"
                % P.MAX_REPORT)
        LOG.debug("sink %s: answered a request from %s", self.name, peer)
        return answer

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
                               session.plane.kind, self.name, remote,
                               int(session.caps)))
        session.run_data(conn, connect.stream)

    def forget(self, session):
        with self.lock:
            key = (session.peer, session.transfer_id)
            if self.sessions.get(key) is session:
                del self.sessions[key]
                session.record.active = False


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
        self.pdir = self.root.partial_dir(self.transfer_id)
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
                # Verified earlier if its recorded sha512 was compared.
                self.record.set_file(msg.name, size=msg.size, state="done",
                                     verified=bool(
                                         flags & P.FileFlags.HAS_SHA512),
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
            sidecar = False
        else:
            fd = os.open(part, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=self.pdir)
            hasher = self._load_hash(key + ".sha", done, msg)
            sidecar = True
        if flags & P.FileFlags.NO_SHA512:
            hasher = None
        f = SinkFile(msg, parts, key, fd, done, hasher)
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
