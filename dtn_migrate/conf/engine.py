"""[engine] options of dtn-migrate-engine."""

from oslo_config import cfg

from dtn_migrate.conf import utils

engine_group = cfg.OptGroup(
    'engine', title='Migration engine options',
    help='The dtn-migrate-engine runs on a cloud controller. It exports '
         'images from this cloud\'s image service to its DTN and imports '
         'the images its DTN receives from peers.')

engine_opts = [
    cfg.StrOpt(
        'agent_host',
        help='RPC server name ([DEFAULT] host) of this cloud\'s DTN agent. '
             'Required.'),
    cfg.StrOpt(
        'mode', default='pipelined', choices=['pipelined', 'serial'],
        help='pipelined: export, staging, transfer and import overlap, '
             'following the staged file\'s watermark. serial: each stage '
             'waits for the previous one (the fork-and-wait baseline). A '
             'request may override it.'),
    cfg.IntOpt(
        'max_concurrent_migrations', default=4, min=1,
        help='Outgoing migrations run at once; more wait in a queue.'),
    cfg.IntOpt(
        'max_concurrent_imports', default=4, min=1,
        help='Incoming imports run at once; more wait in a queue.'),
    cfg.FloatOpt(
        'poll_interval', default=1.0, min=0.05,
        help='Seconds between polls of the DTN agents.'),
    cfg.FloatOpt(
        'event_fallback_interval', default=10.0, min=0.5,
        help='The DTN agent pushes watermarks, transfer progress and '
             'peer reports to the engine (RPC cast transfer_event); a '
             'stage that got no event for this many seconds asks the '
             'agent itself (an engine restart or a lost cast). An agent '
             'that pushes nothing is polled every poll_interval.'),
    cfg.FloatOpt(
        'progress_interval', default=2.0, min=0.5,
        help='Seconds between two writes of a running migration\'s '
             'progress (stage bytes, rate, ETA) to its database row, and '
             'between dtn_migrate.migration.progress notifications. State '
             'changes are written at once.'),
    cfg.IntOpt(
        'stall_timeout', default=600, min=10,
        help='A migration whose stage makes no progress for this many '
             'seconds fails (and can be retried).'),
    cfg.IntOpt(
        'reconcile_interval', default=30, min=1,
        help='Seconds between checks of this DTN\'s incoming transfers '
             'for imports whose notification was lost, and sweeps of the '
             'staged files that finished migrations left (an engine '
             'stopped before removing them, or the removal failed).'),
    cfg.IntOpt(
        'rpc_timeout', default=60, min=1,
        help='Timeout of RPC calls to the DTN agent.'),
    cfg.FloatOpt(
        'lock_timeout', default=10.0, min=0,
        help='An engine holds a lock on its persistence database (one '
             'engine per database): seconds a starting engine waits for '
             'it (held by another engine, or not yet dropped by the '
             'database after an engine died) before it refuses to start.'),
    cfg.FloatOpt(
        'database_check_interval', default=5.0, min=0.5,
        help='Seconds between checks of the persistence database: the '
             'engine lock is taken again after a database restart, and '
             'migrations whose outcome could not be saved during an '
             'outage are saved (or run again).'),
]


def register_opts(conf):
    utils.register(conf, engine_group, engine_opts)


def list_opts():
    return {engine_group: engine_opts}
