"""RPC endpoints of the DTN agent (topic dtn_migrate_agent)."""

import oslo_messaging as messaging
from oslo_log import log as logging

from dtn_migrate.agent import channels as report_channels
from dtn_migrate.agent import fences
from dtn_migrate.agent import ids
from dtn_migrate.agent import requests as peer_requests
from dtn_migrate import exception
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import report
from dtn_migrate.transfer import request as request_mod

LOG = logging.getLogger(__name__)


class AgentManager:
    """Start, follow, cancel and resume transfers to peer DTNs, and report
    what this DTN is receiving.

    API version history:

    * 1.0 - Initial version.
    """

    target = messaging.Target(version='1.0')

    def __init__(self, host, outgoing, sink, incoming=None, health=None,
                 channels=None, pushes=(), on_report=None,
                 request_timeout=60.0, fences=None):
        """``channels``: report channels to the peers (None: one
        connection per get_peer_report); ``pushes``: the kinds of events
        pushed to the engine; ``on_report(transfer_id)``: this cloud's
        import report of a transfer changed; ``request_timeout``:
        seconds peer_request waits for the peer's answer; ``fences``:
        the engines' claim epochs per transfer (``agent.fences.Fences``;
        None: a command's ``epoch`` is checked but fences nothing).
        """
        self.host = host
        self.outgoing = outgoing
        self.sink = sink
        self.incoming = incoming
        self.health = health
        self.channels = channels
        self.pushes = list(pushes)
        self.on_report = on_report
        self.request_timeout = request_timeout
        self.fences = fences

    def _admit(self, transfer_id, epoch, command):
        """A command of the engine's claim ``epoch`` (None: unfenced) on
        ``transfer_id``: StaleEpoch when a later claim sent one.
        """
        if epoch is None:
            return
        fences.check_epoch(epoch)
        if self.fences is not None:
            self.fences.admit(transfer_id, epoch, command)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def start_transfer(self, ctxt, peer, files, options=None,
                       transfer_id=None, epoch=None):
        """Queue a transfer of ``files`` (paths under the staging root, or
        mappings with path/name/sha512/size/growing/watermark_file) to
        ``peer``.  Returns its status; repeating a request with the same
        ``transfer_id`` returns the existing transfer.  ``epoch``: the
        claim of the engine that asks (this and the other commands of a
        transfer refuse one older than the latest seen: StaleEpoch).
        """
        if transfer_id is not None:
            self._admit(transfer_id, epoch, "start")
        return self.outgoing.start(peer, files, options, transfer_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def fence_transfer(self, ctxt, transfer_id, epoch):
        """An engine claimed the migration of ``transfer_id`` at
        ``epoch``: refuse the commands of every earlier claim from now.
        """
        if epoch is None:
            raise exception.InvalidInput(reason="fence_transfer needs the "
                                                "claim's epoch")
        self._admit(transfer_id, epoch, "fence")

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_transfer(self, ctxt, transfer_id, epoch=None):
        self._admit(transfer_id, epoch, "get")
        return self.outgoing.get(transfer_id)

    def list_transfers(self, ctxt):
        return self.outgoing.list()

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def cancel_transfer(self, ctxt, transfer_id, epoch=None):
        self._admit(transfer_id, epoch, "cancel")
        return self.outgoing.cancel(transfer_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def resume_transfer(self, ctxt, transfer_id, epoch=None):
        self._admit(transfer_id, epoch, "resume")
        return self.outgoing.resume(transfer_id)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_incoming(self, ctxt, transfer_id=None):
        """Transfers this DTN receives (one, with its files, or all)."""
        if transfer_id is None:
            return self.sink.status()
        status = self.sink.status(ids.check_id(transfer_id))
        if status is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        return status

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_watermark(self, ctxt, transfer_id, name):
        """Durable contiguous prefix of an incoming file and its path."""
        info = self.sink.watermark(ids.check_id(transfer_id), name)
        if info is None:
            raise exception.TransferNotFound(transfer_id=transfer_id)
        return info

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def set_import_report(self, ctxt, transfer_id, report, epoch=None):
        """Store this cloud's import report (a JSON mapping of at most
        64 KiB) of a transfer received from a peer; that peer reads it
        with get_peer_report.  Only final states ("active", "failed")
        are stored durably.  Returns the incoming record, without the
        report.  ``epoch``: as for start_transfer, of the engine that
        imports.
        """
        tid = ids.check_id(transfer_id)
        self._admit(tid, epoch, "report")
        live = self.sink.status(tid, with_files=False)
        rec = self._incoming().set_report(tid, report,
                                          live and live.get("peer"))
        if self.on_report is not None:
            self.on_report(tid)
        return rec

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def get_peer_report(self, ctxt, peer, transfer_id, attempt=1):
        """Fetch from peer DTN ``peer`` the import report of a transfer
        this DTN sent it, telling it the ``attempt`` the caller waits
        for: the report mapping, or None if there is none (yet).  Raises
        PeerUnreachable if the peer cannot be reached or authenticated.
        """
        tid = ids.check_id(transfer_id)
        if not isinstance(peer, str) or not peer:
            raise exception.InvalidInput(reason="peer must be a peer DTN "
                                                "name")
        try:
            report.check_attempt(attempt, lowest=1)
        except ValueError as exc:
            raise exception.InvalidInput(reason=str(exc))
        if self.channels is not None:
            return self.channels.get(peer, tid, attempt)
        target = self.outgoing.peers.source_peer(peer)
        try:
            raw = report.query_report(target, tid, self.outgoing.local_name,
                                      self.outgoing.cfg, attempt=attempt)
        except errors.AuthenticationError as exc:
            raise exception.PeerUnreachable(
                peer=peer, reason="authentication failed: %s" % exc)
        except errors.PeerError as exc:
            if exc.code != errors.Code.AUTH:
                raise exception.PeerUnreachable(peer=peer, reason=str(exc))
            raise exception.PeerUnreachable(
                peer=peer, reason="authentication failed: the peer refused "
                                  "this agent (check the peering's key "
                                  "and TLS settings on both sides): %s"
                                  % exc)
        except (ConnectionError, OSError, errors.TransferError) as exc:
            raise exception.PeerUnreachable(peer=peer, reason=str(exc))
        return report_channels.decode(peer, tid, raw)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def peer_request(self, ctxt, peer, request):
        """Send ``request`` (a JSON mapping of at most 64 KiB, e.g. a
        mirror deletion) to peer DTN ``peer``, whose agent asks its own
        cloud's engine, and return that cloud's answer (a mapping).
        Raises PeerNotFound for an unknown peer and PeerUnreachable if
        the peer cannot be reached or authenticated, refuses the request
        or its engine does not answer.
        """
        if not isinstance(peer, str) or not peer:
            raise exception.InvalidInput(reason="peer must be a peer DTN "
                                                "name")
        try:
            raw = peer_requests.encode(request)
        except ValueError as exc:
            raise exception.InvalidInput(reason=str(exc))
        target = self.outgoing.peers.source_peer(peer)
        try:
            answer = request_mod.send_request(
                target, raw, self.outgoing.local_name, self.outgoing.cfg,
                timeout=self.request_timeout)
        except (ConnectionError, OSError, errors.TransferError) as exc:
            raise report_channels._unreachable(peer, exc)
        try:
            return peer_requests.decode(answer, "answer")
        except ValueError:
            raise exception.PeerUnreachable(
                peer=peer, reason="its answer is not a JSON mapping")

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def list_incoming(self, ctxt):
        """Transfers received (persisted across restarts), each merged
        with the sink's live status when it has one; reports are left
        out (see ``report_state``, ``report_time``), and so are records
        expired (``[agent] incoming_retention_days``).
        """
        live = {s["transfer_id"]: s for s in self.sink.status()}
        active = {t for t, s in live.items() if s.get("active")}
        out = []
        for rec in self._incoming().list(active):
            entry = dict(live.pop(rec["transfer_id"], {"active": False}))
            entry.update(rec)
            out.append(entry)
        for status in live.values():
            out.append(dict(status, report_state=None, report_time=None,
                            wanted_attempt=None))
        return out

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def peer_health(self, ctxt, peer=None):
        """Health of peer DTN ``peer``, or of every peer: a list of
        {name, address, port, reachable, rtt_ms, last_throughput,
        last_transfer_at, checked_at, error}.  Reachability and rtt_ms
        come from an authenticated handshake with the peer's transfer
        port (cached a few seconds); last_throughput (bytes/s) and
        last_transfer_at from the last transfer this agent completed to
        it.  Raises PeerNotFound for an unknown peer.
        """
        if self.health is None:
            raise exception.ConfigError(reason="this agent does not check "
                                               "its peers' health")
        return self.health.check(peer)

    @messaging.expected_exceptions(exception.DtnMigrateException)
    def ping(self, ctxt):
        pong = {"host": self.host, "peers": self.outgoing.peers.names,
                "listen_port": self.sink.port}
        root = getattr(self.sink, "root", None)
        if root is not None:
            pong["staging_root"] = root.path
        pong["pushes"] = self.pushes
        return pong

    def _incoming(self):
        if self.incoming is None:
            raise exception.ConfigError(reason="this agent keeps no "
                                               "incoming records")
        return self.incoming
