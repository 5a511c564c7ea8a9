"""Source side of a REPORT connection: fetch a peer sink's import report.

The report of a transfer is stored at the sink by its own cloud and
pulled by the sending side over an authenticated connection, so that
status crosses clouds only on the DTN-to-DTN link.  The asker names the
attempt it waits for (CONNECT ``epoch``), so that the sink's side learns
of a retried migration.
"""

import os

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer import source


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
