"""Framed message connections over TCP, optionally inside TLS."""

import errno
import os
import queue
import socket
import ssl
import threading

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol

TLS_RECORD_HANDSHAKE = 0x16


def tune_socket(sock, buffer_bytes, user_timeout):
    """Large buffers, no Nagle, fast detection of a dead peer."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if buffer_bytes:
        for force, plain in ((getattr(socket, "SO_SNDBUFFORCE", None),
                              socket.SO_SNDBUF),
                             (getattr(socket, "SO_RCVBUFFORCE", None),
                              socket.SO_RCVBUF)):
            try:
                # The FORCE variants pass net.core.[rw]mem_max when the
                # agent has CAP_NET_ADMIN; otherwise the kernel caps.
                sock.setsockopt(socket.SOL_SOCKET, force or plain,
                                buffer_bytes)
            except (OSError, TypeError):
                sock.setsockopt(socket.SOL_SOCKET, plain, buffer_bytes)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if user_timeout:
        idle = max(1, int(user_timeout / 3))
        for opt, val in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", idle),
                         ("TCP_KEEPCNT", 3),
                         ("TCP_USER_TIMEOUT", int(user_timeout * 1000))):
            if hasattr(socket, opt):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)


class Connection:
    """One framed connection.  ``send`` is thread-safe; ``recv*`` must be
    called from a single reader thread.
    """

    def __init__(self, sock, peer, tls=False):
        self.sock = sock
        self.peer = peer
        self.tls = tls
        self._send_lock = threading.Lock()
        self._closed = False
        self.bytes_sent = 0
        self.bytes_received = 0
        self._seal = None       # auth.FrameMac of frames sent
        self._open = None       # auth.FrameMac of frames received
        self.object_key = None

    def __repr__(self):
        return "<Connection %s%s>" % (self.peer, " tls" if self.tls else "")

    def authenticate(self, send_key, recv_key, object_key):
        """From now on, tag every frame sent and require a good tag on
        every frame received (see auth).
        """
        self._seal = auth.FrameMac(send_key)
        self._open = auth.FrameMac(recv_key)
        self.object_key = object_key

    @property
    def authenticated(self):
        return self._seal is not None

    @property
    def can_sendfile(self):
        return not self.tls

    # Sending.
    def send(self, msg, payload=None, sendfile=None):
        """Send a message, then ``payload`` bytes or, zero-copy, the
        ``sendfile=(fd, offset, length)`` region of a file.  On plain TCP
        the frame and the payload go in one ``sendmsg`` (gathered from
        where they are: the payload is not copied into the frame).
        """
        frame = protocol.encode_frame(
            msg, protocol.FLAG_TAG if self._seal is not None else 0)
        try:
            with self._send_lock:
                if self._seal is not None:
                    # Tagged in the order the frames go out.
                    frame += self._seal.tag(frame)
                if payload is not None and not self.tls:
                    self._sendv(frame, payload)
                    return
                self.sock.sendall(frame)
                self.bytes_sent += len(frame)
                if payload is not None:
                    self.sock.sendall(payload)
                    self.bytes_sent += len(payload)
                elif sendfile is not None:
                    self._sendfile(*sendfile)
        except (OSError, ValueError) as exc:
            raise ConnectionError("send to %s failed: %s"
                                  % (self.peer, exc)) from exc

    def _sendv(self, *parts):
        """Send ``parts`` back to back with as few ``sendmsg`` calls as
        the socket allows.
        """
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        while views:
            n = self.sock.sendmsg(views)
            self.bytes_sent += n
            while n:
                head = views[0]
                if n >= head.nbytes:
                    n -= head.nbytes
                    views.pop(0)
                else:
                    views[0] = head[n:]
                    n = 0

    def _sendfile(self, fd, offset, length):
        end = offset + length
        while offset < end:
            n = os.sendfile(self.sock.fileno(), fd, offset, end - offset)
            if n == 0:
                raise ConnectionError("source file shrank under sendfile")
            offset += n
            self.bytes_sent += n

    # Receiving.
    def recv_into(self, view, n, boundary=False):
        """Fill ``view[:n]`` exactly or raise TruncatedFrame.  With
        ``boundary`` (a frame starts here), a close before the first byte
        is a clean ConnectionResetError instead.
        """
        got = 0
        flags = 0 if self.tls else socket.MSG_WAITALL
        while got < n:
            try:
                k = self.sock.recv_into(view[got:n], n - got, flags)
            except (socket.timeout, ssl.SSLError, OSError) as exc:
                if isinstance(exc, socket.timeout):
                    raise errors.TruncatedFrame(
                        "timed out waiting for %s" % self.peer)
                raise ConnectionError("receive from %s failed: %s"
                                      % (self.peer, exc)) from exc
            if not k:
                if got or not boundary:
                    raise errors.TruncatedFrame(
                        "%s closed the connection inside a frame"
                        % self.peer)
                raise ConnectionResetError("%s closed the connection"
                                           % self.peer)
            got += k
        self.bytes_received += n

    def recv_header(self):
        """Read and check a frame header: (raw bytes, version, type,
        flags, body length, crc).
        """
        raw = bytearray(protocol.HEADER_SIZE)
        self.recv_into(memoryview(raw), protocol.HEADER_SIZE, boundary=True)
        raw = bytes(raw)
        return (raw,) + protocol.parse_header_full(raw)

    def recv(self, expect=None, max_body=None, refuse=None):
        """Receive one message (``expect``: allowed types or None;
        ``max_body``: a tighter bound of its body than MAX_BODY;
        ``refuse``: the text of the error for another type, with a %s
        for its name).  Nothing is allocated for a body before its
        header passed these checks.
        """
        raw, version, mtype, flags, length, crc = self.recv_header()
        if expect is not None and mtype not in expect:
            raise errors.ProtocolError(
                refuse % mtype.name if refuse else
                "unexpected %s from %s (expected %s)"
                % (mtype.name, self.peer, "/".join(t.name for t in expect)))
        if max_body is not None and length > max_body:
            raise errors.BoundsError("%s body of %d bytes from %s exceeds %d"
                                     % (mtype.name, length, self.peer,
                                        max_body))
        refusal = self._open is not None and self._open.seq == 0 and \
            mtype == protocol.MsgType.ERROR and not flags
        if version != protocol.VERSION and not (
                self._open is None and mtype == protocol.MsgType.ERROR):
            raise errors.ProtocolError(
                "%s speaks protocol version %d, this agent %d: upgrade "
                "the older agent" % (self.peer, version, protocol.VERSION),
                code=errors.Code.VERSION)
        if not refusal and bool(flags & protocol.FLAG_TAG) != \
                (self._open is not None):
            raise errors.IntegrityError(
                "%s frame from %s %s an authentication tag"
                % (mtype.name, self.peer,
                   "lacks" if self._open is not None else "has"))
        body = bytearray(length)
        if length:
            self.recv_into(memoryview(body), length)
        body = bytes(body)
        if self._open is not None and not refusal:
            self._check_tag(raw + body, mtype)
        return protocol.decode_body(mtype, body, crc)

    def _check_tag(self, frame, mtype):
        tag = bytearray(protocol.TAG_SIZE)
        self.recv_into(memoryview(tag), protocol.TAG_SIZE)
        seq = self._open.seq
        if not self._open.check(frame, bytes(tag)):
            raise errors.IntegrityError(
                "%s frame %d from %s fails its authentication tag: changed, "
                "replayed or reordered on the way" % (mtype.name, seq,
                                                      self.peer))

    def settimeout(self, timeout):
        self.sock.settimeout(timeout)

    def shutdown(self):
        """Wake any thread blocked on this connection."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self):
        if self._closed:
            return
        self._closed = True
        self.shutdown()
        try:
            self.sock.close()
        except OSError:
            pass


class TlsClosed(ConnectionError):
    """A TLS peer closed the connection during authentication: a network
    fault, or (if it keeps happening) a rejected certificate.
    """


def _tls_failure(peer, exc):
    """Certificate problems are authentication failures (not retried);
    anything else during the TLS handshake is a network fault.
    """
    reason = (getattr(exc, "reason", None) or "").upper()
    if isinstance(exc, ssl.SSLCertVerificationError) or \
            "CERTIFICATE" in reason:
        return errors.AuthenticationError(
            "TLS handshake with %s failed: certificate not accepted: %s"
            % (peer, exc))
    if "ALERT" in reason:
        return errors.AuthenticationError(
            "TLS handshake with %s failed: the peer rejected this agent's "
            "certificate or TLS settings: %s" % (peer, exc))
    return TlsClosed("TLS connection with %s closed during authentication "
                     "(%s)" % (peer, exc))


def tls_error_in(conn, exc):
    """Re-classify an error seen while authenticating over TLS.

    With TLS 1.3 a rejected client certificate surfaces only at the first
    read or write after the TLS handshake; a write may fail first with a
    broken pipe while the peer's alert waits to be read, so read it.
    """
    cause = exc.__cause__
    if conn.tls and isinstance(cause, (BrokenPipeError,
                                       ConnectionResetError)):
        try:
            conn.settimeout(1.0)
            conn.recv_header()
        except (ConnectionError, errors.TransferError) as late:
            if isinstance(late.__cause__, ssl.SSLError):
                cause = late.__cause__
    if conn.tls and isinstance(cause, ssl.SSLError):
        return _tls_failure(conn.peer, cause)
    if conn.tls and isinstance(cause, (BrokenPipeError,
                                       ConnectionResetError)):
        return TlsClosed("TLS connection with %s closed during "
                         "authentication (%s)" % (conn.peer, cause))
    return exc


def connect(host, port, timeout, buffer_bytes, user_timeout,
            tls_context=None, server_hostname=None):
    """Open a tuned connection to ``host:port``."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise ConnectionError("cannot connect to %s:%s: %s"
                              % (host, port, exc))
    tune_socket(sock, buffer_bytes, user_timeout)
    peer = "%s:%s" % (host, port)
    if tls_context is not None:
        try:
            sock = tls_context.wrap_socket(
                sock, server_hostname=server_hostname or host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise _tls_failure(peer, exc)
    return Connection(sock, peer, tls=tls_context is not None)


def _close_gently(sock, linger=0.5):
    """Close after our last bytes (a TLS alert) reach the peer.

    Closing with unread input would send a reset that can destroy them.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(linger)
        while sock.recv(65536):
            pass
    except OSError:
        pass
    finally:
        sock.close()


def accept(sock, addr, buffer_bytes, user_timeout, tls_context=None,
           handshake_timeout=10.0):
    """Wrap an accepted socket; TLS is detected from the first byte."""
    peer = "%s:%s" % addr[:2]
    tune_socket(sock, buffer_bytes, user_timeout)
    sock.settimeout(handshake_timeout)
    try:
        first = sock.recv(1, socket.MSG_PEEK)
    except OSError as exc:
        sock.close()
        raise ConnectionError("%s: %s" % (peer, exc))
    if not first:
        sock.close()
        raise ConnectionResetError("%s closed before sending anything" % peer)
    tls = first[0] == TLS_RECORD_HANDSHAKE
    if tls:
        if tls_context is None:
            sock.close()
            raise errors.AuthenticationError(
                "%s offered TLS but this agent has no certificate" % peer)
        try:
            sock = tls_context.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            _close_gently(sock)
            raise _tls_failure(peer, exc)
    return Connection(sock, peer, tls=tls)


def is_disconnect(exc):
    return isinstance(exc, (ConnectionError, errors.TruncatedFrame)) or (
        isinstance(exc, OSError) and exc.errno in (
            errno.EPIPE, errno.ECONNRESET, errno.ETIMEDOUT, errno.EBADF))


class Outbox:
    """Queue and writer thread for one connection's outgoing messages.

    Both ends of a control connection read and write at once; a thread
    that blocks in ``send`` while the peer's thread blocks in its own
    ``send`` would deadlock.  Readers therefore only ``post``.
    """

    def __init__(self, conn, on_error, name="outbox"):
        self.conn = conn
        self._queue = queue.SimpleQueue()
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name=name,
                                        daemon=True)
        self._thread.start()

    def post(self, msg):
        self._queue.put(msg)

    def _run(self):
        while True:
            msg = self._queue.get()
            if msg is None:
                return
            try:
                self.conn.send(msg)
            except Exception as exc:  # noqa: B902 - reported, then stop
                self._on_error(exc)
                return

    def close(self, timeout=5.0):
        """Send what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)
