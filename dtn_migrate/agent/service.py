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
        self.incoming = reports.IncomingStore(self.outgoing.state_dir)
        self.sink = sink.SinkServer(
            conf.agent.staging_root, self.cfg, self.host, self.peers.key,
            host=conf.agent.listen_address, port=conf.agent.listen_port,
            tls_context=peers.server_tls_context(conf),
            require_tls=self.peers.require_tls, rdma_device=self.rdma,
            reports=self.incoming.report_for, on_incoming=self.on_incoming)
        self.manager = manager.AgentManager(self.host, self.outgoing,
                                            self.sink, self.incoming)
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

    def on_incoming(self, transfer_id, peer, epoch):
        """A peer began a session of ``transfer_id`` (called by the sink
        on its notification thread): record it and tell this cloud's
        engine.  Never raises.
        """
        try:
            self.incoming.note(transfer_id, peer)
        except Exception:  # noqa: B902 - logged; the transfer goes on
            LOG.exception("could not record incoming transfer %s from %s",
                          transfer_id, peer)
        if not self.conf.agent.notify_engine:
            return
        try:
            if self.engine is None:
                # Bounded retries: a down broker must not hold the
                # notifications back for ever.
                self.engine = engine_rpcapi.EngineAPI(
                    timeout=10, retry=2, transport=self.transport)
            self.engine.incoming_transfer({}, transfer_id, peer)
            LOG.debug("engine told of incoming transfer %s from %s "
                      "(session %d)", transfer_id, peer, epoch)
        except Exception as exc:  # noqa: B902 - the engine can ask later
            LOG.warning("could not tell the engine of incoming transfer %s "
                        "from %s: %s", transfer_id, peer, exc)

    def stop(self, graceful=True):
        if self._stopped.is_set():
            return
        LOG.info("dtn-migrate-agent %s stopping", self.host)
        if self.rpcserver is not None:
            self.rpcserver.stop()
            self.rpcserver.wait()
        self.outgoing.stop()
        self.sink.stop()
        if self.rdma is not None:
            self.rdma.close()
        super().stop(graceful)
        self._stopped.set()

    def wait(self):
        self._stopped.wait()
