"""[DEFAULT] options."""

import socket

from oslo_config import cfg

default_opts = [
    cfg.HostAddressOpt(
        'host',
        default=socket.gethostname(),
        sample_default='<hostname>',
        help='Name of this DTN. It is the agent\'s RPC server name on the '
             'topic dtn_migrate_agent, and the name it gives peers when it '
             'connects to them, so every peer\'s [peer:<name>] section for '
             'this DTN must use it.'),
]


def register_opts(conf):
    conf.register_opts(default_opts)


def list_opts():
    return {'DEFAULT': default_opts}
