"""[coordination] options: the tooz backend through which active/active
engines elect the one that runs a cloud's timers.
"""

from oslo_config import cfg

from dtn_migrate.conf import utils

coordination_group = cfg.OptGroup(
    'coordination', title='Coordination options',
    help='With [task_flow] jobboard_enabled, the engines of a cloud elect '
         'one of them, through tooz, to run the timers of protection '
         '(scans, recovery-point grades, mirror deletions).')

coordination_opts = [
    cfg.StrOpt(
        'backend_url', secret=True,
        help='tooz URL of the election\'s backend, e.g. '
             'zookeeper://zk1:2181,zk2:2181?timeout=6 or '
             'redis://:password@redis:6379?timeout=6. Unset: the '
             'jobboard\'s backend ([task_flow]).'),
]


def register_opts(conf):
    utils.register(conf, coordination_group, coordination_opts)


def list_opts():
    return {coordination_group: coordination_opts}
