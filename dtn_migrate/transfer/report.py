"""Source side of a REPORT connection: fetch a peer sink's import report.

The report of a transfer is stored at the sink by its own cloud and
pulled by the sending side over an authenticated connection, so that
status crosses clouds only on the DTN-to-DTN link.  The asker names the
attempt it waits for (CONNECT ``epoch``), so that the sink's side learns
of a retried migration.

A REPORT connection may stay open (a report channel): after its first
REPORT frame, a sink whose report lookup can say when a report changed
(see :class:`ReportFeed`) sends the report again on the same connection
each time it changes, and every ``KEEPALIVE`` seconds unchanged, until
the asker closes it.  The frames are those of a one-shot answer, so an
asker that reads one frame and closes (an older agent) is served as
before, and :class:`ReportChannel` reconnects to a sink that closes
after one frame (an older sink), every ``retry`` seconds.
"""

import logging
import os
import select
import threading
import time

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

#: Seconds between two sends of an unchanged report on a report channel.
KEEPALIVE = 30.0
#: Seconds between two checks that the asker is still there.
CHECK_INTERVAL = 1.0


def check_attempt(value, lowest=0):
    """``value`` if it is an attempt number from ``lowest`` to
    MAX_ATTEMPT (0 meaning "unspecified"), else ValueError.
    """
    if not isinstance(value, int) or isinstance(value, bool) or \
            not lowest <= value <= P.MAX_ATTEMPT:
        raise ValueError("attempt must be an integer from %d to %d, not %r"
                         % (lowest, P.MAX_ATTEMPT, value))
    return value


def attempt_of(report):
    """The import attempt a report mapping is about (0 if it does not
    say).
    """
    value = report.get("attempt")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return 0


def _transfer_bytes(transfer_id):
    if isinstance(transfer_id, str):
        try:
            transfer_id = bytes.fromhex(transfer_id)
        except ValueError:
            transfer_id = b""
    if not isinstance(transfer_id, bytes) or len(transfer_id) != 16:
        raise ValueError("transfer id must be 16 bytes or 32 hex digits")
    return transfer_id


def query_report(peer, transfer_id, local_name, cfg, timeout=None,
                 attempt=0):
    """Ask ``peer`` (a ``source.Peer``) for its report of ``transfer_id``,
    telling it the ``attempt`` this side waits for (0: unspecified).

    Returns the report bytes, or None when the peer holds none for this
    agent.  Raises ConnectionError when the peer cannot be reached,
    errors.AuthenticationError on a wrong key or certificate, and
    errors.PeerError / errors.ProtocolError when it refuses or answers
    nonsense (a sink without REPORT support refuses the role, one that
    predates attempts a non-zero attempt).
    """
    tid = _transfer_bytes(transfer_id)
    check_attempt(attempt)
    conn, _ack = source.open_connection(peer, P.Connect(
        P.VERSION, P.VERSION, P.Role.REPORT, 0, P.Caps.NONE, tid, attempt,
        cfg.object_size, 1, os.urandom(32), local_name), cfg, timeout)
    try:
        msg = conn.recv(expect=(P.MsgType.REPORT, P.MsgType.ERROR))
    finally:
        conn.close()
    if isinstance(msg, P.Error):
        raise errors.PeerError("%s refused the report request: %s"
                               % (peer.name, msg.message), msg.code)
    return msg.body if msg.found else None


class ReportFeed:
    """Tells a sink's report channels that a transfer's report changed:
    ``changed(tid)`` bumps its version and wakes the channels of it.
    Calling the feed looks the report up (``lookup(tid, peer, attempt)``).
    """

    def __init__(self, lookup):
        self.lookup = lookup
        self.cond = threading.Condition()
        self.versions = {}

    def __call__(self, transfer_id, peer, attempt):
        return self.lookup(transfer_id, peer, attempt)

    def version(self, transfer_id):
        with self.cond:
            return self.versions.get(transfer_id, 0)

    #: Transfers whose versions are kept; past it they are all dropped
    #: (a waiting channel then just looks its report up once more).
    MAX_TRANSFERS = 4096

    def changed(self, transfer_id):
        with self.cond:
            if transfer_id not in self.versions and \
                    len(self.versions) >= self.MAX_TRANSFERS:
                self.versions.clear()
            self.versions[transfer_id] = \
                self.versions.get(transfer_id, 0) + 1
            self.cond.notify_all()

    def forget(self, transfer_id):
        with self.cond:
            self.versions.pop(transfer_id, None)

    def wait(self, transfer_id, version, timeout):
        """The version of ``transfer_id``'s report once it is not
        ``version`` any more, or after ``timeout`` seconds.
        """
        with self.cond:
            self.cond.wait_for(
                lambda: self.versions.get(transfer_id, 0) != version,
                timeout)
            return self.versions.get(transfer_id, 0)


def _asker_left(conn):
    """The asker closed the connection (it never sends after CONNECT:
    anything readable is its end).
    """
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def serve_updates(conn, transfer_id, sent, lookup, feed, stopping,
                  keepalive=None, check=None, version=None):
    """Keep a REPORT connection open after its first answer ``sent``
    (bytes or None, looked up at the feed's ``version``): send
    ``lookup()`` again whenever ``feed`` says the report of
    ``transfer_id`` changed (if it did) and every ``keepalive`` seconds;
    return when the asker closes the connection or ``stopping`` (an
    Event) is set.
    """
    keepalive = KEEPALIVE if keepalive is None else keepalive
    check = CHECK_INTERVAL if check is None else check
    if version is None:
        version = feed.version(transfer_id)
    last = time.monotonic()
    while not stopping.is_set():
        new = feed.wait(transfer_id, version, check)
        if _asker_left(conn):
            return
        now = time.monotonic()
        if new == version and now - last < keepalive:
            continue
        version = new
        body = lookup()
        if body == sent and now - last < keepalive:
            continue
        conn.send(P.Report(1, body) if body is not None else P.Report(0))
        sent, last = body, now


class ReportChannel:
    """A kept-open REPORT connection to ``peer`` for ``transfer_id`` and
    ``attempt``: ``on_report(body or None)`` is called with each report
    the peer sends (first answer, changes, keepalives), ``on_error(exc)``
    when the connection fails; it reconnects after ``retry`` seconds
    until :meth:`close`.
    """

    def __init__(self, peer, transfer_id, local_name, cfg, attempt,
                 on_report, on_error=None, retry=5.0, keepalive=KEEPALIVE):
        self.peer = peer
        self.tid = _transfer_bytes(transfer_id)
        self.local_name = local_name
        self.cfg = cfg
        self.attempt = check_attempt(attempt)
        self.on_report = on_report
        self.on_error = on_error
        self.retry = retry
        self.keepalive = keepalive
        self.closed = threading.Event()
        self.conn = None
        self.connections = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, daemon=True,
            name="report-%s-%s" % (peer.name, self.tid.hex()[:8]))

    def start(self):
        self.thread.start()
        return self

    def close(self):
        self.closed.set()
        with self.lock:
            conn = self.conn
        if conn is not None:
            conn.shutdown()

    def _run(self):
        while not self.closed.is_set():
            try:
                self._serve()
            except (ConnectionError, OSError, errors.TransferError) as exc:
                if self.closed.is_set():
                    return
                if self.on_error is not None:
                    self.on_error(exc)
            self.closed.wait(self.retry)

    def _serve(self):
        conn, _ack = source.open_connection(self.peer, P.Connect(
            P.VERSION, P.VERSION, P.Role.REPORT, 0, P.Caps.NONE, self.tid,
            self.attempt, self.cfg.object_size, 1, os.urandom(32),
            self.local_name), self.cfg)
        with self.lock:
            self.conn = conn
            self.connections += 1
        try:
            if self.closed.is_set():
                return
            # A live sink sends at least every keepalive seconds.
            conn.settimeout(3 * self.keepalive)
            frames = 0
            while not self.closed.is_set():
                try:
                    msg = conn.recv(expect=(P.MsgType.REPORT,
                                            P.MsgType.ERROR))
                except (ConnectionError, OSError) as exc:
                    if not frames:
                        raise
                    # A sink that answers once and closes (an older
                    # one), or a channel cut short: asked again later.
                    LOG.debug("report channel to %s ended: %s",
                              self.peer.name, exc)
                    return
                frames += 1
                if isinstance(msg, P.Error):
                    raise errors.PeerError(
                        "%s refused the report request: %s"
                        % (self.peer.name, msg.message), msg.code)
                self.on_report(msg.body if msg.found else None)
        finally:
            with self.lock:
                self.conn = None
            conn.close()
