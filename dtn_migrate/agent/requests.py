"""Requests between the clouds of peer DTNs (a migration's preflight,
a mirror deletion of a replica), carried over the DTN link (see
``transfer.request``).

A request and its answer are JSON mappings, compact on the wire and at
most MAX_REPORT bytes.  The asking cloud's engine calls its agent's
``peer_request``, which sends the request to the peer's agent; that
agent's sink hands it to :class:`PeerRequests`, which asks its own
cloud's engine (an RPC call on that cloud's bus) and sends back the
answer.
"""

import json

import oslo_messaging as messaging
from oslo_log import log as logging

from dtn_migrate import exception
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import request as request_mod
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

#: The action of a migration's preflight (``engine.preflight``): the
#: staging room is this DTN's to check, the rest its engine's.
PREFLIGHT = "preflight"


def encode(mapping, what="request"):
    """Compact JSON bytes of ``mapping`` (a dict), at most MAX_REPORT;
    ValueError otherwise.
    """
    if not isinstance(mapping, dict):
        raise ValueError("a %s is a JSON mapping" % what)
    try:
        raw = json.dumps(mapping, sort_keys=True, separators=(",", ":"),
                         allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError("a %s is a JSON mapping: %s" % (what, exc))
    if len(raw) > P.MAX_REPORT:
        raise ValueError("a %s is at most %d bytes of JSON, not %d"
                         % (what, P.MAX_REPORT, len(raw)))
    return raw


def decode(raw, what="request"):
    """The mapping that ``raw`` (bytes) encodes; ValueError if it is not
    a JSON mapping.
    """
    try:
        decoded = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        decoded = None
    if not isinstance(decoded, dict):
        raise ValueError("a %s is a JSON mapping" % what)
    return decoded


def _reason(exc):
    """What a peer may read of an engine's refusal: its message, without
    the remote traceback oslo.messaging appends to it.
    """
    message = getattr(exc, "message", None) or str(exc)
    lines = str(message).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__


def room_refusal(room, peer, request):
    """The answer that refuses a preflight ``request`` of ``peer`` for
    want of staging room (``room(peer, transfer_id, size)``, the sink's
    ``room_for``), or None when there is room or the preflight names no
    transfer (a protection policy's).  ValueError for a malformed one.
    """
    size, tid = request.get("size"), request.get("transfer_id")
    if size is None and tid is None:
        return None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 \
            or not isinstance(tid, str):
        raise ValueError("a preflight names its transfer and size")
    try:
        room(peer, tid, size)
    except errors.TransferError as exc:
        LOG.warning("preflight of transfer %s from %s refused: %s", tid,
                    peer, exc)
        return {"allowed": False, "reason": str(exc)}
    return None


class PeerRequests:
    """The sink's ``requests`` callback: a peer's request to this
    cloud's engine, and its answer back.  A preflight (``PREFLIGHT``)
    is answered here when the staging has no room for its transfer, and
    by the engine otherwise.
    """

    def __init__(self, engine, timeout, room=None):
        """``engine()``: this cloud's ``EngineAPI`` (made on first use);
        ``timeout``: seconds the engine may take to answer; ``room``:
        the sink's ``room_for`` (None: a preflight goes to the engine
        alone).
        """
        self.engine = engine
        self.timeout = timeout
        self.room = room

    def __call__(self, peer, body):
        """The answer (bytes) to ``peer``'s request ``body`` (bytes).
        Raises ValueError for a body that is no JSON mapping, and
        ``request.RequestFailed`` (its message is for the peer) when the
        engine does not answer or answers nonsense.
        """
        request = decode(body)
        answer = None
        if request.get("action") == PREFLIGHT and self.room is not None:
            answer = room_refusal(self.room, peer, request)
        if answer is None:
            answer = self._ask(peer, request)
        if not isinstance(answer, dict):
            LOG.error("the engine's answer to a request from %s is not a "
                      "mapping: %r", peer, type(answer).__name__)
            raise request_mod.RequestFailed(
                "the peer's engine answered no mapping")
        try:
            return encode(answer, "answer")
        except ValueError as exc:
            LOG.error("the engine's answer to a request from %s cannot be "
                      "sent: %s", peer, exc)
            raise request_mod.RequestFailed(
                "the peer's engine answered more than %d bytes of JSON"
                % P.MAX_REPORT)

    def _ask(self, peer, request):
        try:
            return self.engine().peer_request({}, peer, request,
                                              timeout=self.timeout)
        except messaging.MessagingTimeout:
            LOG.warning("the engine did not answer a request from %s "
                        "within %g s", peer, self.timeout)
            raise request_mod.RequestFailed(
                "the peer's engine did not answer within %g s"
                % self.timeout)
        except exception.DtnMigrateException as exc:
            LOG.warning("the engine refused a request from %s: %s", peer,
                        _reason(exc))
            raise request_mod.RequestFailed(
                "the peer's engine refused the request: %s" % _reason(exc))
        except Exception:  # noqa: B902 - the peer is answered
            LOG.exception("the engine failed a request from %s", peer)
            raise request_mod.RequestFailed(
                "the peer's engine did not answer")
