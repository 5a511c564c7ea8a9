"""Connection opening: CONNECT, CHALLENGE, AUTH, CONNECT_ACK (see auth)."""

import logging

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)
_AUTH_FAILED = "authentication failed (wrong key for this peering?)"


def client(conn, connect, key):
    """Source side.  Returns the sink's ConnectAck or raises."""
    try:
        return _client(conn, connect, key)
    except ConnectionError as exc:
        raise stream.tls_error_in(conn, exc)


def _client(conn, connect, key):
    if not connect.sink:
        raise ValueError("a CONNECT names the sink it means to reach")
    conn.send(connect)
    body = connect.encode()
    # A connection lost before the sink proved or refused anything is a
    # network fault (retried), not an authentication failure (fatal).
    try:
        msg = conn.recv(expect=(P.MsgType.CHALLENGE, P.MsgType.ERROR),
                        max_body=P.MAX_PREAUTH_BODY)
    except errors.TruncatedFrame as exc:
        raise ConnectionError("%s: connection lost during authentication: "
                              "%s" % (conn.peer, exc))
    if isinstance(msg, P.Error):
        raise errors.PeerError("%s refused the connection: %s%s"
                               % (conn.peer, msg.message, _hint(msg)),
                               msg.code)
    transcript = auth.transcript(body, msg.nonce, msg.sink)
    if not auth.verify(auth.sink_proof(key, transcript), msg.proof):
        raise errors.AuthenticationError(
            "%s could not prove the shared key: wrong key for this "
            "peering, or not the expected agent%s"
            % (conn.peer, "" if msg.sink == connect.sink else
               " (it calls itself %r, not %r)" % (msg.sink, connect.sink)))
    if msg.sink != connect.sink:
        raise errors.NameMismatch(
            "%s: this connection from %r was meant for sink %r but reached "
            "sink %r, which holds the same peering key: redirected, or "
            "the peering's address names another agent; refused"
            % (conn.peer, connect.peer, connect.sink, msg.sink))
    proof_c = auth.source_proof(key, transcript, msg.proof)
    conn.send(P.Auth(proof_c))
    if connect.caps & P.Caps.FRAME_AUTH:
        keys = auth.session_keys(key, transcript, msg.proof, proof_c)
        conn.authenticate(keys.source, keys.sink, keys.objects)
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


def _hint(error):
    if error.code == errors.Code.VERSION:
        return " (this agent speaks protocol %d: upgrade the older agent)" \
            % P.VERSION
    return ""


def server(conn, lookup_key, require_frame_auth=True, *, name):
    """Sink side up to a verified AUTH.  Returns (Connect, key).

    ``name`` is this sink's agent name: a CONNECT meant for another
    sink is refused (before any key is looked up), and the name is sent
    in the CHALLENGE, whose proof covers it.
    ``lookup_key(peer_name)`` gives the shared key or None.  An unknown
    peer gets the same treatment as a wrong key, so that a prober
    learns nothing about which peer names exist.  Frames are tagged from
    the CONNECT_ACK on when the source asks for it; with
    ``require_frame_auth`` a source that does not is refused.
    """
    # Nothing of the size an unauthenticated peer asks for is allocated.
    connect = conn.recv(expect=(P.MsgType.CONNECT,),
                        max_body=P.MAX_PREAUTH_BODY,
                        refuse="%s sent %%s before CONNECT" % conn.peer)
    body = connect.encode()
    if not (connect.version_min <= P.VERSION <= connect.version_max):
        conn.send(P.Error(errors.Code.VERSION, 1, P.NO_FILE,
                          "no common protocol version (sink speaks %d)"
                          % P.VERSION))
        raise errors.ProtocolError("%s speaks protocol %d..%d only"
                                   % (conn.peer, connect.version_min,
                                      connect.version_max),
                                   code=errors.Code.VERSION)
    if connect.sink != name:
        _refuse(conn, "this is sink %r, not %r: the connection from %r "
                "was redirected, or its peering's address names another "
                "agent" % (name, connect.sink, connect.peer))
        raise errors.NameMismatch(
            "%s (peer %r) meant to reach sink %r, but this is sink %r: "
            "redirected, or its peering's address names another agent; "
            "refused" % (conn.peer, connect.peer, connect.sink, name))
    key = lookup_key(connect.peer)
    known = key is not None
    if not known:
        key = auth.nonce()
    nonce = auth.nonce()
    transcript = auth.transcript(body, nonce, name)
    proof_s = auth.sink_proof(key, transcript)
    conn.send(P.Challenge(P.VERSION, nonce, proof_s, name))
    reply = conn.recv(expect=(P.MsgType.AUTH,), max_body=P.MAX_PREAUTH_BODY)
    if not known or not auth.verify(
            auth.source_proof(key, transcript, proof_s), reply.proof):
        _refuse(conn, _AUTH_FAILED)
        raise errors.AuthenticationError(
            "%s failed authentication as peer %r (%s)"
            % (conn.peer, connect.peer,
               "wrong key" if known else "unknown peer"))
    if connect.caps & P.Caps.FRAME_AUTH:
        keys = auth.session_keys(key, transcript, proof_s, reply.proof)
        conn.authenticate(keys.sink, keys.source, keys.objects)
    elif require_frame_auth:
        _refuse(conn, "this sink requires frame authentication: set "
                "[transfer] frame_auth on the source")
        raise errors.AuthenticationError(
            "%s (peer %s) did not ask for frame authentication, which "
            "this sink requires" % (conn.peer, connect.peer))
    return connect, key


def _refuse(conn, why):
    try:
        conn.send(P.Error(errors.Code.AUTH, 1, P.NO_FILE, why))
    except ConnectionError:
        pass
