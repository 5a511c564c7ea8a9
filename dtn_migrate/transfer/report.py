"""Source side of a REPORT connection: fetch a peer sink's import report.

The report of a transfer is stored at the sink by its own cloud and
pulled by the sending side over an authenticated connection, so that
status crosses clouds only on the DTN-to-DTN link.
"""

import os

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import handshake
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer.transport import stream


def _transfer_bytes(transfer_id):
    if isinstance(transfer_id, str):
        try:
            transfer_id = bytes.fromhex(transfer_id)
        except ValueError:
            transfer_id = b""
    if not isinstance(transfer_id, bytes) or len(transfer_id) != 16:
        raise ValueError("transfer id must be 16 bytes or 32 hex digits")
    return transfer_id


def query_report(peer, transfer_id, local_name, cfg, timeout=None):
    """Ask ``peer`` (a ``source.Peer``) for its report of ``transfer_id``.

    Returns the report bytes, or None when the peer holds none for this
    agent.  Raises ConnectionError when the peer cannot be reached,
    errors.AuthenticationError on a wrong key or certificate, and
    errors.PeerError / errors.ProtocolError when it refuses or answers
    nonsense (a sink without REPORT support refuses the role).
    """
    tid = _transfer_bytes(transfer_id)
    timeout = cfg.connect_timeout if timeout is None else timeout
    conn = stream.connect(peer.host, peer.port, timeout, 0,
                          cfg.tcp_user_timeout, peer.tls_context,
                          peer.server_hostname)
    try:
        conn.settimeout(timeout)
        handshake.client(conn, P.Connect(
            P.VERSION, P.VERSION, P.Role.REPORT, 0, P.Caps.NONE, tid, 0,
            cfg.object_size, 1, os.urandom(32), local_name), peer.key)
        msg = conn.recv(expect=(P.MsgType.REPORT, P.MsgType.ERROR))
    finally:
        conn.close()
    if isinstance(msg, P.Error):
        raise errors.PeerError("%s refused the report request: %s"
                               % (peer.name, msg.message), msg.code)
    return msg.body if msg.found else None
