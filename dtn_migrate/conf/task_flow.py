"""[task_flow] options: the TaskFlow jobboard that active/active engines
share (the shape of Octavia's group of the same name).

Unset (``jobboard_enabled = false``, the default), one engine runs a
cloud's migrations on its own worker pools, as it always has.
"""

from oslo_config import cfg

from dtn_migrate.conf import utils

task_flow_group = cfg.OptGroup(
    'task_flow', title='TaskFlow jobboard options',
    help='With a jobboard, any number of dtn-migrate-engine processes '
         'share a cloud\'s migrations: each posts the migrations it is '
         'asked for as jobs, and each runs a conductor that claims jobs '
         'and resumes their flows from the SQL persistence.')

#: The jobboard drivers (stevedore names, entry points of
#: ``dtn_migrate.coordination.jobboard.NAMESPACE``).
DRIVERS = ('zookeeper_taskflow_driver', 'redis_taskflow_driver')

task_flow_opts = [
    cfg.BoolOpt(
        'jobboard_enabled', default=False,
        help='Share migrations between engines through a jobboard: any '
             'number of engines on one persistence database, each '
             'claiming jobs and taking over a dead engine\'s. False: one '
             'engine per persistence database, which holds a lock on it.'),
    cfg.StrOpt(
        'jobboard_backend_driver', default='zookeeper_taskflow_driver',
        choices=[(DRIVERS[0], 'ZooKeeper: a claim is an ephemeral node, '
                  'gone with its engine\'s session.'),
                 (DRIVERS[1], 'Redis: a claim expires unless its engine '
                  'extends it (jobboard_expiration_time).')],
        help='The jobboard\'s backend.'),
    cfg.ListOpt(
        'jobboard_backend_hosts', default=['127.0.0.1'],
        help='Hosts of the jobboard\'s backend (ZooKeeper: every server of '
             'the ensemble; Redis: the server, or the sentinels).'),
    cfg.PortOpt(
        'jobboard_backend_port',
        help='Port of the jobboard\'s backend on each host. Unset: the '
             'backend\'s own (ZooKeeper 2181, Redis 6379).'),
    cfg.StrOpt(
        'jobboard_backend_username',
        help='User name of the jobboard\'s backend (Redis ACL).'),
    cfg.StrOpt(
        'jobboard_backend_password', secret=True,
        help='Password of the jobboard\'s backend (Redis).'),
    cfg.StrOpt(
        'jobboard_backend_namespace', default='dtn_migrate_jobboard',
        help='ZooKeeper path (without its leading /) or Redis key prefix '
             'of the jobboard: the engines of one cloud share it; another '
             'cloud\'s engines must not.'),
    cfg.StrOpt(
        'jobboard_redis_sentinel',
        help='Name of the Redis sentinel master; unset: no sentinel.'),
    cfg.FloatOpt(
        'jobboard_zookeeper_session_timeout', default=6.0, min=1.0,
        help='Seconds the ZooKeeper ensemble keeps a silent engine\'s '
             'session, and its claims: how long a dead engine\'s '
             'migrations wait for another engine.'),
    cfg.IntOpt(
        'jobboard_expiration_time', default=6, min=1,
        help='Seconds a Redis claim lasts unless its engine extends it '
             '(it does every third of this): how long a dead engine\'s '
             'migrations wait for another engine.'),
    cfg.IntOpt(
        'jobboard_max_claims', default=5, min=1,
        help='Claims of one job by engines that did not finish it, after '
             'which it goes to the jobboard\'s trash and its migration '
             'fails (a poison job), instead of cycling between engines.'),
]


def register_opts(conf):
    utils.register(conf, task_flow_group, task_flow_opts)


def list_opts():
    return {task_flow_group: task_flow_opts}
