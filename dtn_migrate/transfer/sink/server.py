"""Sink side: accept transfers from authenticated peers into a staging root.

``SinkServer`` listens on one port.  Each connection authenticates
(see ``wire.auth``) and is either a session's control connection or one of
its data streams; a control connection opens a ``SinkSession``
(``sink.session``), which the data streams then join.  For every
announced file the session creates a partial copy under
``<root>/.dtn-partial/<transfer>/``, sized by ftruncate (preallocated
only for files of PREALLOCATE_MIN or more in sessions without zero
extents); objects are checked (bounds, then xxh3) and written at their
offsets by the shared I/O threads, zero extents left as holes
(``sink.recv``); the file's contiguous-prefix sha512 is fed from the
buffers the objects arrived in, in order, and saves its state next to
the partial copy, so neither a reconnect nor a restart re-reads what was
already hashed (``sink.hash``); a per-session syncer makes batches
durable and only then reports them with BLOCK_SYNC (``sink.sync``).
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
import logging
import socket
import threading
import time

from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import mounts
from dtn_migrate.transfer import paths
from dtn_migrate.transfer import report as report_mod
from dtn_migrate.transfer import request as request_mod
from dtn_migrate.transfer.sink import admission
from dtn_migrate.transfer.sink import file as sinkfile
from dtn_migrate.transfer.sink import quota as sinkquota
from dtn_migrate.transfer.sink import recv as sinkrecv
from dtn_migrate.transfer.sink import room as sinkroom
from dtn_migrate.transfer.sink import session as sinksession
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.transport import tcp
from dtn_migrate.transfer.wire import handshake
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

# Kept importable from here.
XATTR_SHA512 = sinkfile.XATTR_SHA512
UNCONFIRMED = sinkfile.UNCONFIRMED
TransferRecord = sinkfile.TransferRecord
#: accept() errors after which the listening socket is no more.
_LISTENER_GONE = frozenset((errno.EBADF, errno.EINVAL, errno.ENOTSOCK))


class SinkServer:
    """Listens for sources and writes their files under ``root``."""

    def __init__(self, root, cfg, name, lookup_key, host="0.0.0.0", port=0,
                 tls_context=None, require_tls=None, rdma_device=None,
                 reports=None, on_incoming=None, owner=None,
                 on_session=None, listener=None, requests=None,
                 names=None, quota=None, held=None, preferred_sources=()):
        """``preferred_sources``: addresses and networks of the peers'
        connections, admitted first (``admission``).

        Callbacks, all optional:

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
          no requests;
        * ``names(peer)``: how far the names of ``peer``'s sessions may
          reach, one of ``paths.CONFINEMENTS`` (None: ``any``), and the
          leaves of ``migration`` names;
        * ``quota(peer)``: the staging quota of ``peer``, a
          ``sinkquota.Limits`` (None: no quota); ``held(peer)``: the
          transfers of ``peer`` it counts besides this run's.
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
            cfg.max_unauthenticated_per_address, cfg.handshake_timeout,
            cfg.max_connections_per_peer, preferred_sources)
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
        self.names = names or (lambda peer: (paths.ANY, ()))
        self.quota = sinkquota.StagingQuota(self.root, quota, held) \
            if quota is not None else None
        # Transfers whose stray partial copies are being removed.
        self.sweeping = set()
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
                                            cfg.frame_auth, name=self.name)
            why = self.admission.authenticated(ticket, connect.peer)
            if why is not None:
                raise errors.ProtocolError(why, code=errors.Code.LIMIT)
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

    def open_files(self, peer, but=None):
        """Files the sessions of ``peer`` but session ``but`` hold open."""
        with self.lock:
            sessions = [s for (p, _), s in self.sessions.items()
                        if p == peer and s is not but]
        return sum(s.held_files() for s in sessions)

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
            # The transfer's last session: listed while it runs, held by
            # the record until its close has ended.
            last = rec and rec.session
            running = key in self.sessions
        if last is not None:
            if running:
                LOG.info("sink %s: transfer %s reconnected; closing its "
                         "previous session", self.name, tid)
            # Closed here, or already closing itself (unlisted): until
            # its close ends it still writes its files' checkpoints and
            # removes the partial directory if empty, which the new
            # session would have opened.
            last.close("replaced by a new connection")
            if not last.gone.wait(self.cfg.handshake_timeout):
                raise errors.ProtocolError(
                    "transfer %s: its previous session is still closing"
                    % tid, code=errors.Code.LIMIT)
        with self.lock:
            if key in self.sessions:
                # Another connection of this transfer was registered
                # while this one waited for the old session to close: it
                # is the newer one.  Registered over, it would run on,
                # unlisted and never closed; this one retries instead.
                raise errors.ProtocolError(
                    "transfer %s connected again while its previous "
                    "session closed; this connection is the older one"
                    % tid, code=errors.Code.LIMIT)
            if len(self.sessions) >= self.cfg.max_sessions:
                raise errors.ProtocolError(
                    "sink %s is at its limit of %d sessions"
                    % (self.name, self.cfg.max_sessions),
                    code=errors.Code.LIMIT)
            if tid in self.sweeping:
                raise errors.ProtocolError(
                    "transfer %s: its stray partial copies are being "
                    "removed; retry" % tid, code=errors.Code.LIMIT)
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
            session = sinksession.SinkSession(
                self, connect, conn, rec.epoch, plane, rec, caps)
            self.sessions[key] = session
            rec.session = session
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

    def confine(self, peer, transfer_hex, name):
        """The components of ``name`` if ``peer``'s session of
        ``transfer_hex`` may write it; else BadNameError.
        """
        mode, leaves = self.names(peer)
        return paths.confine(name, transfer_hex, mode, leaves)

    def room_for(self, peer, transfer_hex, size, files=2):
        """Whether ``peer`` may stage a transfer of ``files`` files and
        ``size`` bytes here (a migration's descriptor and data): its
        staging quota and this file system's free space, less
        ``min_free_bytes``, the checks its files meet when they arrive.
        What ``transfer_hex`` holds already (a retried transfer) counts
        as room.  Raises QuotaError or NoSpaceError (messages fit for
        the peer: the ones its transfer would get); nothing is charged.
        """
        if transfer_hex is not None and not paths.is_transfer_id(
                transfer_hex):
            raise ValueError("not a transfer id: %r" % (transfer_hex,))
        already = self.root.usage(transfer_hex) if transfer_hex \
            else (0, 0)
        name = "transfer %s" % (transfer_hex or "of %d bytes" % size)
        if self.quota is not None:
            self.quota.room(peer, name, size, files, self.record_list(),
                            already)
        sinkroom.check_free(name, size,
                            sinkroom.free_bytes(self.root.path) + already[0],
                            self.cfg.min_free_bytes)

    def record_list(self):
        with self.lock:
            return list(self.records.values())

    def sweep_strays(self, max_age, now=None):
        """Remove the partial copies (and their checkpoints) of transfers
        with no session, untouched for ``max_age`` seconds; their final
        files are never touched.  Returns the transfers swept.
        """
        now = time.time() if now is None else now
        swept = []
        for tid in self.root.partial_transfers():
            with self.lock:
                rec = self.records.get(tid)
                if tid in self.sweeping or rec is not None and (
                        rec.active or rec.session is not None):
                    continue
                newest = self.root.partial_mtime(tid)
                if newest is None or now - newest < max_age:
                    continue
                self.sweeping.add(tid)
            try:
                removed = self.root.remove_partial(tid)
                LOG.info("sink %s: removed %d stray partial files of "
                         "transfer %s (untouched for %d s)", self.name,
                         removed, tid, now - newest)
                swept.append(tid)
            except OSError as exc:
                LOG.warning("sink %s: could not remove the stray partial "
                            "copies of transfer %s: %s", self.name, tid, exc)
            finally:
                with self.lock:
                    self.sweeping.discard(tid)
        return swept

    def let_go(self, session):
        """``session``'s close has ended: its record stops holding it."""
        with self.lock:
            if session.record.session is session:
                session.record.session = None

    def forget(self, session):
        with self.lock:
            key = (session.peer, session.transfer_id)
            if self.sessions.get(key) is session:
                del self.sessions[key]
                session.record.active = False
