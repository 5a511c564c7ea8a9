"""Requests between a policy's two clouds, over the DTN link.

No broker, database or credential is shared between clouds: what one
engine asks of the other (a mirror deletion, the metadata of a failback)
goes to its own DTN agent, which sends it to the peer's agent on an
authenticated REQUEST connection; that agent asks its engine
(``EngineManager.peer_request``) and carries the answer back.  Each
request is a small JSON mapping with an ``action``.
"""

from oslo_config import cfg

from dtn_migrate.engine.tasks import base
from dtn_migrate import exception

_ID_LIMIT = 64


def rpc_timeout(conf):
    """Seconds to wait for this cloud's agent: longer than it may take to
    reach the peer and then get its engine's answer (each bounded by
    ``[agent] peer_request_timeout``).
    """
    try:
        return 2 * conf.agent.peer_request_timeout + 10
    except cfg.Error:
        return 130


def ask(conf, res, peer, request):
    """The peer's answer (a mapping) to ``request``.  Raises
    PeerUnreachable (and the other errors of the agent's
    ``peer_request``) or one of ``base.TRANSIENT_RPC``.
    """
    answer = res.agent.peer_request(base.CTXT, res.agent_host, peer,
                                    request, timeout=rpc_timeout(conf))
    if not isinstance(answer, dict):
        raise exception.PeerUnreachable(
            peer=peer, reason="it answered %r to %s" % (
                answer, request.get("action")))
    return answer


def check_id(request, key):
    """``request[key]``, an id; else InvalidInput."""
    value = request.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= _ID_LIMIT:
        raise exception.InvalidInput(
            reason="a peer request's %s must be an id" % key)
    return value


def dispatch(handlers, peer, request):
    """The answer of the handler (``{action: handle(peer, request)}``)
    of ``request``'s action.
    """
    action = request.get("action") if isinstance(request, dict) else None
    handler = handlers.get(action) if isinstance(action, str) else None
    if handler is None:
        raise exception.InvalidInput(
            reason="unknown peer request %r" % (
                action if isinstance(request, dict)
                else type(request).__name__,))
    return handler(peer, request)
