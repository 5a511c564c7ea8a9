"""The agent service: the sink listener plus the RPC server."""

import threading

import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_service import service

from dtn_migrate.agent import channels
from dtn_migrate.agent import fences
from dtn_migrate.agent import manager
from dtn_migrate.agent import peers
from dtn_migrate.agent import reports
from dtn_migrate.agent import requests
from dtn_migrate.agent import rpcapi
from dtn_migrate.agent import transfers
from dtn_migrate.conf import transfer as transfer_conf
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import pusher
from dtn_migrate import rpc
from dtn_migrate.transfer import report as report_mod
from dtn_migrate.transfer.sink import server as sink

LOG = logging.getLogger(__name__)


def probe_rdma(conf, cfg):
    if cfg.transport == 'tcp':
        return None
    from dtn_migrate.transfer.transport import rdma
    dev, reason = rdma.probe(conf.rdma.device, conf.rdma.port,
                             conf.rdma.gid_index)
    if dev is None:
        if cfg.transport == 'rdma':
            LOG.error("transport=rdma but RDMA is unavailable: %s", reason)
        elif reason.startswith("pyverbs incompatible"):
            # Not a machine without RDMA: a pyverbs this agent cannot use.
            LOG.warning("RDMA unusable, using TCP: %s", reason)
        else:
            LOG.info("RDMA unavailable, using TCP: %s", reason)
    else:
        LOG.info("RDMA data plane on %s", dev.describe())
    return dev


class AgentService(service.Service):
    def __init__(self, conf, transport=None):
        """``transport``: the RPC transport (default: ``rpc.TRANSPORT``)."""
        super().__init__()
        self.conf = conf
        self.transport = transport
        self.host = conf.host
        self.cfg = transfer_conf.engine_config(conf)
        self.peers = peers.PeerRegistry(conf)
        # Logged at start-up: a key file others can read.
        peers.check_key_files(conf)
        self.rdma = probe_rdma(conf, self.cfg)
        self.outgoing = transfers.OutgoingTransfers(
            conf, self.host, self.cfg, self.peers, self.rdma)
        self.incoming = reports.IncomingStore(
            self.outgoing.state_dir,
            retention=conf.agent.incoming_retention_days * 86400)
        # Report channels: the peers' agents keep a REPORT connection
        # open and this sink pushes each new report over it.
        self.feed = report_mod.ReportFeed(self.report_for)
        self.pusher = None
        pushes = ()
        if conf.agent.notify_engine:
            self.pusher = pusher.EventPusher(self._push_event,
                                             conf.agent.event_interval)
            pushes = ("watermark", "transfer", "report")
            self.outgoing.on_status = self.on_transfer_status
        # Requests of the peers' clouds go to this cloud's engine (none
        # without one).
        handler = requests.PeerRequests(
            self._engine, conf.agent.peer_request_timeout,
            room=lambda *args: self.sink.room_for(*args)) \
            if conf.agent.notify_engine else None
        self.sink = sink.SinkServer(
            conf.agent.staging_root, self.cfg, self.host, self.peers.key,
            host=conf.agent.listen_address, port=conf.agent.listen_port,
            tls_context=peers.server_tls_context(conf),
            require_tls=self.peers.require_tls, rdma_device=self.rdma,
            reports=self.feed, on_incoming=self.on_incoming,
            owner=self.owner_of, on_session=self.on_session,
            listener=self.on_file_event if self.pusher else None,
            requests=handler, names=self.peers.confinement,
            quota=self.peers.quota, held=self.incoming.transfers_of,
            preferred_sources=self.peers.source_addresses())
        self.health = peers.PeerHealth.from_conf(
            conf, self.peers, self.host, self.cfg,
            last_transfer=self.outgoing.last_completed)
        self.channels = channels.ReportChannels(
            self.outgoing, on_report=self.on_peer_report)
        # The engines' claim epochs, kept as long as incoming records.
        self.fences = fences.Fences(
            self.outgoing.state_dir,
            retention=conf.agent.incoming_retention_days * 86400)
        self.manager = manager.AgentManager(
            self.host, self.outgoing, self.sink, self.incoming, self.health,
            channels=self.channels, pushes=pushes,
            on_report=self.feed.changed,
            request_timeout=conf.agent.peer_request_timeout,
            fences=self.fences)
        self.engine = None
        self.rpcserver = None
        self._stopped = threading.Event()

    def start(self):
        super().start()
        self.sink.start()
        target = messaging.Target(topic=rpcapi.TOPIC, server=self.host)
        self.rpcserver = rpc.get_server(target, [self.manager],
                                        transport=self.transport)
        self.rpcserver.start()
        LOG.info("dtn-migrate-agent %s ready: peers %s, port %d",
                 self.host, ", ".join(self.peers.names) or "none",
                 self.sink.port)
        if self.conf.agent.auto_resume:
            self.outgoing.resume_interrupted()
        if self.pusher is not None:
            threading.Thread(target=self._progress_loop, daemon=True,
                             name="transfer-progress").start()
        threading.Thread(target=self._sweep_loop, daemon=True,
                         name="stray-sweep").start()

    def owner_of(self, transfer_id):
        """The sink's owner lookup: the peer that sent ``transfer_id``,
        or this DTN itself when it sends that transfer (its staged files
        are this cloud's export: no peer may write them).
        """
        if self.outgoing.has(transfer_id):
            return self.host
        return self.incoming.owner(transfer_id)

    def sweep_strays(self):
        """Remove stray partial copies (see [agent] stray_max_age), and
        the claim epochs of transfers long gone.
        """
        try:
            self.sink.sweep_strays(self.conf.agent.stray_max_age)
        except Exception:  # noqa: B902 - the next sweep tries again
            LOG.exception("the sweep of stray partial copies failed")
        try:
            self.fences.sweep()
        except OSError:
            LOG.exception("the sweep of old claim epochs failed")

    def _sweep_loop(self):
        """At start, then every [agent] stray_sweep_interval."""
        self.sweep_strays()
        while not self._stopped.wait(self.conf.agent.stray_sweep_interval):
            self.sweep_strays()

    # Events pushed to this cloud's engine.
    def on_file_event(self, transfer_id, name):
        """The sink's listener: a file's watermark or state changed."""
        self.pusher.push("watermark", transfer_id, name,
                         lambda: self.sink.watermark(transfer_id, name))

    def on_transfer_status(self, transfer_id):
        """An outgoing transfer's saved status changed."""
        if self.pusher is not None:
            self.pusher.push("transfer", transfer_id, None,
                             lambda: self._transfer_status(transfer_id))

    def _transfer_status(self, transfer_id):
        try:
            return self.outgoing.get(transfer_id)
        except Exception:  # noqa: B902 - the engine asks then
            return None

    def _progress_loop(self):
        """Push the progress of running outgoing transfers."""
        interval = self.conf.agent.progress_event_interval
        while not self._stopped.wait(interval):
            for tid in self.outgoing.running_ids():
                self.on_transfer_status(tid)

    def on_peer_report(self, transfer_id, report):
        """A report channel got a new report from the peer."""
        if self.pusher is not None:
            self.pusher.push("report", transfer_id, None, lambda: report)

    def _engine(self):
        """This cloud's engine client, made on first use.  Bounded
        retries: a down broker must not hold the notifications back for
        ever.
        """
        if self.engine is None:
            self.engine = engine_rpcapi.EngineAPI(
                timeout=10, retry=2, transport=self.transport)
        return self.engine

    def _push_event(self, kind, transfer_id, name, info, origin):
        self._engine().transfer_event({}, kind, transfer_id, name=name,
                                      info=info, origin=origin)

    def on_session(self, transfer_id, peer, epoch):
        """A peer begins a session of ``transfer_id`` (called by the sink
        before it acknowledges it): record it, so that the transfer is
        known, and owned by ``peer``, before any byte arrives.
        """
        self.incoming.note(transfer_id, peer)

    def on_incoming(self, transfer_id, peer, epoch):
        """A peer began a session of ``transfer_id`` (called by the sink
        on its notification thread): tell this cloud's engine.
        """
        if self.conf.agent.notify_engine:
            self._tell_engine(transfer_id, peer, "session %d" % epoch)

    def report_for(self, transfer_id, peer, attempt):
        """The sink's report lookup.  A peer waiting for a later attempt
        than before is remembered, and the engine told (later, on the
        sink's notification thread) so that it imports again.
        """
        try:
            wanted = attempt and self.incoming.want_attempt(
                transfer_id, peer, attempt)
        except Exception:  # noqa: B902 - the report is still answered
            LOG.exception("could not record that %s waits for attempt %d "
                          "of transfer %s", peer, attempt, transfer_id)
            wanted = False
        if wanted and self.conf.agent.notify_engine:
            self.sink.defer(self._tell_engine, transfer_id, peer,
                            "attempt %d" % attempt, attempt)
        return self.incoming.report_for(transfer_id, peer, attempt)

    def _tell_engine(self, transfer_id, peer, why, attempt=None):
        """Cast incoming_transfer to this cloud's engine.  Never raises."""
        kwargs = {} if attempt is None else {"attempt": attempt}
        try:
            self._engine().incoming_transfer({}, transfer_id, peer,
                                             **kwargs)
            LOG.debug("engine told of incoming transfer %s from %s (%s)",
                      transfer_id, peer, why)
        except Exception as exc:  # noqa: B902 - the engine can ask later
            LOG.warning("could not tell the engine of incoming transfer %s "
                        "from %s (%s): %s", transfer_id, peer, why, exc)

    def stop(self, graceful=True):
        if self._stopped.is_set():
            return
        LOG.info("dtn-migrate-agent %s stopping", self.host)
        if self.rpcserver is not None:
            self.rpcserver.stop()
            self.rpcserver.wait()
        self.outgoing.stop()
        self.channels.close()
        if self.pusher is not None:
            self.pusher.close()
        self.health.close()
        self.sink.stop()
        if self.rdma is not None:
            self.rdma.close()
        super().stop(graceful)
        self._stopped.set()

    def wait(self):
        self._stopped.wait()
