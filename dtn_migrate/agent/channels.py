"""Report channels: one kept-open REPORT connection to a peer DTN per
transfer this agent sent and whose import report its engine waits for
(see ``transfer.report``).  The peer's sink pushes each new report over
it; the latest is kept here, handed to ``get_peer_report`` without a new
connection, and pushed to the engine.
"""

import json
import threading
import time

from oslo_log import log as logging

from dtn_migrate import exception
from dtn_migrate.common import states
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import report as report_mod

LOG = logging.getLogger(__name__)

#: Seconds a first ``get`` waits for the channel's first answer.
FIRST_ANSWER = 15.0
#: A channel nobody asked for this long is closed.
IDLE = 300.0


def _unreachable(peer, exc):
    if isinstance(exc, errors.AuthenticationError):
        return exception.PeerUnreachable(
            peer=peer, reason="authentication failed: %s" % exc)
    if isinstance(exc, errors.PeerError) and exc.code == errors.Code.AUTH:
        return exception.PeerUnreachable(
            peer=peer, reason="authentication failed: the peer refused "
                              "this agent (check the peering's key and "
                              "TLS settings on both sides): %s" % exc)
    return exception.PeerUnreachable(peer=peer, reason=str(exc))


def decode(peer, tid, raw):
    """A report mapping from its wire bytes (None stays None)."""
    if raw is None:
        return None
    try:
        decoded = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        decoded = exc
    if not isinstance(decoded, dict):
        raise exception.PeerUnreachable(
            peer=peer, reason="its report of transfer %s is not a JSON "
                              "mapping" % tid)
    return decoded


class _Channel:
    def __init__(self, owner, peer, tid, attempt):
        self.owner = owner
        self.peer = peer
        self.tid = tid
        self.attempt = attempt
        self.cond = threading.Condition()
        self.answered = False
        self.raw = None
        self.error = None
        self.asked = time.monotonic()
        self.link = None

    def on_report(self, raw):
        with self.cond:
            changed = not self.answered or raw != self.raw
            self.answered, self.raw, self.error = True, raw, None
            self.cond.notify_all()
        if changed:
            self.owner.changed(self)
        try:
            final = raw is not None and decode(
                self.peer, self.tid,
                raw).get("state") in states.IMPORT_FINAL_STATES
        except exception.PeerUnreachable:
            final = False
        if final or time.monotonic() - self.asked > self.owner.idle:
            self.owner.retire(self)

    def on_error(self, exc):
        LOG.info("report channel to %s for transfer %s: %s", self.peer,
                 self.tid, exc)
        with self.cond:
            self.error = exc
            self.cond.notify_all()
        if time.monotonic() - self.asked > self.owner.idle:
            self.owner.retire(self)

    def latest(self, wait):
        """The report mapping (None: none yet); raises PeerUnreachable
        while the channel's last connection failed before any answer.
        """
        with self.cond:
            self.asked = time.monotonic()
            self.cond.wait_for(lambda: self.answered or self.error, wait)
            if not self.answered:
                if self.error is not None:
                    raise _unreachable(self.peer, self.error)
                return None
            raw = self.raw
        return decode(self.peer, self.tid, raw)


class ReportChannels:
    """The channels of this agent, by (peer, transfer id)."""

    def __init__(self, outgoing, on_report=None, idle=IDLE,
                 first_answer=FIRST_ANSWER, retry=5.0):
        """``on_report(transfer_id, report mapping or None)``: a channel
        got a new report (called on the channel's thread).
        """
        self.outgoing = outgoing
        self.on_report = on_report
        self.idle = idle
        self.first_answer = first_answer
        self.retry = retry
        self.lock = threading.Lock()
        self.channels = {}          # (peer, tid) -> _Channel
        self.opened = 0

    def get(self, peer, tid, attempt):
        """The latest report of ``tid`` from ``peer`` for ``attempt``;
        the first call opens the channel and waits for its first answer.
        """
        target = self.outgoing.peers.source_peer(peer)
        with self.lock:
            chan = self.channels.get((peer, tid))
            if chan is not None and chan.attempt != attempt:
                self._close(chan)
                chan = None
            if chan is None:
                chan = self._open(target, peer, tid, attempt)
        return chan.latest(self.first_answer)

    def _open(self, target, peer, tid, attempt):
        chan = _Channel(self, peer, tid, attempt)
        chan.link = report_mod.ReportChannel(
            target, tid, self.outgoing.local_name, self.outgoing.cfg,
            attempt, chan.on_report, chan.on_error, retry=self.retry)
        self.channels[(peer, tid)] = chan
        self.opened += 1
        chan.link.start()
        return chan

    def _close(self, chan):
        link, chan.link = chan.link, None
        if link is not None:
            link.close()
        if self.channels.get((chan.peer, chan.tid)) is chan:
            del self.channels[(chan.peer, chan.tid)]

    def retire(self, chan):
        """Close ``chan`` (a final report came, or nobody asked for a
        while): a later ``get`` opens a new channel, whose first answer
        is the peer's report then.
        """
        with self.lock:
            link, chan.link = chan.link, None
            if self.channels.get((chan.peer, chan.tid)) is chan:
                del self.channels[(chan.peer, chan.tid)]
        if link is not None:
            link.close()

    def changed(self, chan):
        if self.on_report is None:
            return
        try:
            report = chan.latest(0)
        except exception.PeerUnreachable:
            return
        self.on_report(chan.tid, report)

    def close(self):
        with self.lock:
            for chan in list(self.channels.values()):
                self._close(chan)
