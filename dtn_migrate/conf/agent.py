"""[agent] options: where the DTN agent listens, stores and reads."""

from oslo_config import cfg

from dtn_migrate.conf import utils

agent_group = cfg.OptGroup(
    'agent', title='DTN agent options',
    help='The dtn-migrate-agent runs on a Data Transfer Node. It receives '
         'transfers from peer DTNs into its staging root and sends files '
         'from it on request.')

agent_opts = [
    cfg.HostAddressOpt(
        'listen_address', default='0.0.0.0',
        help='Address on which the agent accepts transfers from peers.'),
    cfg.PortOpt(
        'listen_port', default=47100,
        help='TCP port for peer transfers (control and data streams).'),
    cfg.StrOpt(
        'staging_root', default='/var/lib/dtn-migrate/staging',
        help='Directory the agent receives into and sends from. Nothing '
             'outside it is ever read or written for a transfer; it is '
             'typically the NFS export the clouds stage images on.'),
    cfg.StrOpt(
        'state_dir', default='/var/lib/dtn-migrate/state',
        help='Where outgoing transfers keep their manifest and object log, '
             'so that they resume after a restart. Must not be inside '
             'staging_root.'),
    cfg.BoolOpt(
        'auto_resume', default=True,
        help='On start, resume outgoing transfers that were running when '
             'the agent stopped.'),
    cfg.IntOpt(
        'max_outgoing', default=8, min=1,
        help='Outgoing transfers run at once; more wait in a queue.'),
    cfg.ListOpt(
        'peers', default=[],
        help='Names of the peer DTNs. Each needs a [peer:<name>] section.'),
    cfg.IntOpt(
        'rpc_workers', default=8, min=1,
        help='Threads serving RPC calls.'),
    cfg.BoolOpt(
        'notify_engine', default=True,
        help='Tell this cloud\'s dtn-migrate-engine (RPC cast '
             'incoming_transfer) when a peer DTN starts sending a '
             'transfer. Failures are logged; transfers never wait for it.'),
    cfg.FloatOpt(
        'event_interval', default=0.25, min=0.01,
        help='With notify_engine: the agent pushes the watermarks of '
             'incoming files, the status of outgoing transfers and the '
             'peers\' import reports to its engine (RPC cast '
             'transfer_event); at most one event per file or transfer '
             'every this many seconds, unless its state changed.'),
    cfg.FloatOpt(
        'progress_event_interval', default=2.0, min=0.1,
        help='Seconds between two pushes of a running outgoing '
             'transfer\'s progress to the engine.'),
    cfg.IntOpt(
        'incoming_retention_days', default=7, min=0,
        help='Days the record of a received transfer is kept once its '
             'import report is final (active or failed) and the transfer '
             'is idle; 0 keeps records for ever. While it exists, only '
             'the peer that sent the transfer may send it again or read '
             'its report.'),
    cfg.FloatOpt(
        'peer_probe_timeout', default=3.0, min=0.1, max=60.0,
        help='Seconds a peer health check (RPC peer_health, GET '
             '/v1/peers) waits for a peer DTN to answer an authenticated '
             'handshake on its transfer port before it calls it '
             'unreachable.'),
    cfg.FloatOpt(
        'peer_health_cache', default=5.0, min=0.0, max=3600.0,
        help='Seconds the result of a peer health check is reused before '
             'the peer is probed again; 0 probes on every request.'),
    cfg.FloatOpt(
        'stray_max_age', default=172800.0, min=60.0,
        help='Seconds after which the partial copies (and their '
             'checkpoints) of an incoming transfer that has no session '
             'and that nothing touched are strays: the agent removes them '
             'when it starts and every stray_sweep_interval. A source '
             'that resumes later sends those files whole again. Received '
             'files and the staged files of migrations are never '
             'removed by it (the engine removes those once imported). '
             'Default: two days.'),
    cfg.FloatOpt(
        'stray_sweep_interval', default=3600.0, min=1.0,
        help='Seconds between two sweeps of stray partial copies (see '
             'stray_max_age).'),
    cfg.FloatOpt(
        'peer_request_timeout', default=60.0, min=1.0,
        help='Seconds a request from a peer DTN (a mirror deletion) may '
             'wait for this cloud\'s engine, and this agent for a peer\'s '
             'answer.'),
]


def register_opts(conf):
    utils.register(conf, agent_group, agent_opts)


def list_opts():
    return {agent_group: agent_opts}
