"""Connection opening: CONNECT, CHALLENGE, AUTH, CONNECT_ACK (see auth)."""

import logging

from dtn_migrate.transfer import auth
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer.transport import stream

LOG = logging.getLogger(__name__)
_AUTH_FAILED = "authentication failed (wrong key for this peering?)"


def client(conn, connect, key):
    """Source side.  Returns the sink's ConnectAck or raises."""
    try:
        return _client(conn, connect, key)
    except ConnectionError as exc:
        raise stream.tls_error_in(conn, exc)


def _client(conn, connect, key):
    conn.send(connect)
    body = connect.encode()
    # A connection lost before the sink proved or refused anything is a
    # network fault (retried), not an authentication failure (fatal).
    try:
        msg = conn.recv(expect=(P.MsgType.CHALLENGE, P.MsgType.ERROR))
    except errors.TruncatedFrame as exc:
        raise ConnectionError("%s: connection lost during authentication: "
                              "%s" % (conn.peer, exc))
    if isinstance(msg, P.Error):
        raise errors.PeerError("%s refused the connection: %s"
                               % (conn.peer, msg.message), msg.code)
    transcript = body + msg.nonce
    if not auth.verify(auth.sink_proof(key, transcript), msg.proof):
        raise errors.AuthenticationError(
            "%s could not prove the shared key: wrong key for this "
            "peering, or not the expected agent" % conn.peer)
    conn.send(P.Auth(auth.source_proof(key, transcript, msg.proof)))
    try:
        reply = conn.recv(expect=(P.MsgType.CONNECT_ACK, P.MsgType.ERROR))
    except errors.TruncatedFrame as exc:
        raise ConnectionError("%s: connection lost after authentication: "
                              "%s" % (conn.peer, exc))
    if isinstance(reply, P.Error):
        raise errors.PeerError("%s refused the connection: %s"
                               % (conn.peer, reply.message), reply.code,
                               fatal=bool(reply.fatal))
    return reply


def server(conn, lookup_key):
    """Sink side up to a verified AUTH.  Returns (Connect, key).

    ``lookup_key(peer_name)`` gives the shared key or None.  An unknown
    peer gets the same treatment as a wrong key, so that a prober
    learns nothing about which peer names exist.
    """
    mtype, length, crc = conn.recv_header()
    if mtype != P.MsgType.CONNECT:
        raise errors.ProtocolError("%s sent %s before CONNECT"
                                   % (conn.peer, mtype.name))
    body = bytearray(length)
    conn.recv_into(memoryview(body), length)
    body = bytes(body)
    connect = P.decode_body(mtype, body, crc)
    if not (connect.version_min <= P.VERSION <= connect.version_max):
        conn.send(P.Error(errors.Code.VERSION, 1, P.NO_FILE,
                          "no common protocol version (sink speaks %d)"
                          % P.VERSION))
        raise errors.ProtocolError("%s speaks protocol %d..%d only"
                                   % (conn.peer, connect.version_min,
                                      connect.version_max),
                                   code=errors.Code.VERSION)
    key = lookup_key(connect.peer)
    known = key is not None
    if not known:
        key = auth.nonce()
    nonce = auth.nonce()
    transcript = body + nonce
    proof_s = auth.sink_proof(key, transcript)
    conn.send(P.Challenge(P.VERSION, nonce, proof_s))
    reply = conn.recv(expect=(P.MsgType.AUTH,))
    if not known or not auth.verify(
            auth.source_proof(key, transcript, proof_s), reply.proof):
        try:
            conn.send(P.Error(errors.Code.AUTH, 1, P.NO_FILE, _AUTH_FAILED))
        except ConnectionError:
            pass
        raise errors.AuthenticationError(
            "%s failed authentication as peer %r (%s)"
            % (conn.peer, connect.peer,
               "wrong key" if known else "unknown peer"))
    return connect, key
