"""REQUEST connections: one small request to a peer DTN's cloud, and
its answer.

Only DTN-to-DTN traffic crosses clouds, so what one cloud asks of the
other (a mirror deletion of a replica) travels over the authenticated
DTN link: the source sends the request bytes after CONNECT_ACK, the
peer's sink hands them to its ``requests`` handler (which asks its own
cloud) and sends the answer back on the same connection, or a fatal
ERROR.  Neither side interprets the bytes here.

Both sides read within a deadline *in all* (see :func:`recv_within`):
a peer that trickles a frame byte by byte cannot hold a sink's thread,
nor a silent sink the asker.
"""

import contextlib
import os
import threading
import time

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P

#: A REPORT frame's body: found flag and blob length, then the bytes.
MAX_FRAME_BODY = P.MAX_REPORT + 5


class RequestFailed(errors.TransferError):
    """Raised by a sink's request handler: the sink sends its message
    (and ``code``) to the asker.  Its message must be fit for the peer's
    eyes: any other exception is logged and answered with a generic one.
    """


def check_body(body, what="request"):
    """``body`` if it is bytes of 1 to MAX_REPORT, else ValueError."""
    if not isinstance(body, bytes) or not 1 <= len(body) <= P.MAX_REPORT:
        raise ValueError("a %s is 1 to %d bytes" % (what, P.MAX_REPORT))
    return body


@contextlib.contextmanager
def deadline(conn, seconds):
    """Within the block, ``conn`` is shut down once ``seconds`` have
    passed, however slowly its peer keeps sending; yields an Event that
    is set if that happened.
    """
    expired = threading.Event()

    def expire():
        expired.set()
        conn.shutdown()
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield expired
    finally:
        timer.cancel()


def recv_within(conn, expect, seconds):
    """One message of a type in ``expect`` (a REPORT frame at most)
    from ``conn``, received within ``seconds`` in all; TimeoutError if
    it is not.
    """
    start = time.monotonic()
    conn.settimeout(seconds)
    with deadline(conn, seconds) as expired:
        try:
            return conn.recv(expect=expect, max_body=MAX_FRAME_BODY)
        except (ConnectionError, OSError, errors.TruncatedFrame) as exc:
            if expired.is_set() or time.monotonic() - start >= seconds:
                raise TimeoutError("%s sent no complete %s within %.1f s"
                                   % (conn.peer, "/".join(
                                       t.name for t in expect), seconds)
                                   ) from exc
            raise


def send_request(peer, body, local_name, cfg, timeout=None):
    """Send the request ``body`` (bytes) to ``peer`` (a ``source.Peer``)
    and return its answer (bytes).

    ``timeout`` (default: ``cfg.connect_timeout``) bounds the whole
    exchange, the wait for the answer included (the peer's cloud may
    take tens of seconds to act on a request).  Raises ValueError for a
    body that is not 1 to MAX_REPORT bytes, ConnectionError or OSError
    (TimeoutError: no answer in time) when the peer cannot be reached,
    errors.AuthenticationError on a wrong key or certificate, and
    errors.PeerError (with the peer's code and message) when it refuses
    the request: a sink that takes no requests, whose handler failed, or
    that predates REQUEST connections ("unknown role").
    """
    check_body(body)
    timeout = cfg.connect_timeout if timeout is None else timeout
    start = time.monotonic()
    conn, _ack = source.open_connection(peer, P.Connect(
        P.VERSION, P.VERSION, P.Role.REQUEST, 0, P.Caps.NONE,
        os.urandom(16), 0, cfg.object_size, 1, os.urandom(32), local_name),
        cfg, min(timeout, cfg.connect_timeout))
    try:
        conn.send(P.Report(1, body))
        left = max(timeout - (time.monotonic() - start), 0.01)
        msg = recv_within(conn, (P.MsgType.REPORT, P.MsgType.ERROR), left)
    finally:
        conn.close()
    if isinstance(msg, P.Error):
        raise errors.PeerError("%s refused the request: %s"
                               % (peer.name, msg.message), msg.code)
    if not msg.found:
        raise errors.ProtocolError("%s sent no answer to the request"
                                   % peer.name)
    return msg.body
