"""The agent service: the sink listener plus the RPC server."""

import threading

import oslo_messaging as messaging
from oslo_log import log as logging
from oslo_service import service

from dtn_migrate.agent import manager
from dtn_migrate.agent import peers
from dtn_migrate.agent import reports
from dtn_migrate.agent import rpcapi
from dtn_migrate.agent import transfers
from dtn_migrate.conf import transfer as transfer_conf
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import rpc
from dtn_migrate.transfer import sink

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
        self.rdma = probe_rdma(conf, self.cfg)
        self.outgoing = transfers.OutgoingTransfers(
            conf, self.host, self.cfg, self.peers, self.rdma)
        self.incoming = reports.IncomingStore(
            self.outgoing.state_dir,
            retention=conf.agent.incoming_retention_days * 86400)
        self.sink = sink.SinkServer(
            conf.agent.staging_root, self.cfg, self.host, self.peers.key,
            host=conf.agent.listen_address, port=conf.agent.listen_port,
            tls_context=peers.server_tls_context(conf),
            require_tls=self.peers.require_tls, rdma_device=self.rdma,
            reports=self.report_for, on_incoming=self.on_incoming,
            owner=self.incoming.owner, on_session=self.on_session)
        self.health = peers.PeerHealth.from_conf(
            conf, self.peers, self.host, self.cfg,
            last_transfer=self.outgoing.last_completed)
        self.manager = manager.AgentManager(self.host, self.outgoing,
                                            self.sink, self.incoming,
                                            self.health)
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
            if self.engine is None:
                # Bounded retries: a down broker must not hold the
                # notifications back for ever.
                self.engine = engine_rpcapi.EngineAPI(
                    timeout=10, retry=2, transport=self.transport)
            self.engine.incoming_transfer({}, transfer_id, peer, **kwargs)
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
        self.health.close()
        self.sink.stop()
        if self.rdma is not None:
            self.rdma.close()
        super().stop(graceful)
        self._stopped.set()

    def wait(self):
        self._stopped.wait()
