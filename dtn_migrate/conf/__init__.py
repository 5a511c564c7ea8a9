"""oslo.config options of dtn-migrate, one module per option group."""

from oslo_config import cfg

from dtn_migrate.conf import agent
from dtn_migrate.conf import coordination
from dtn_migrate.conf import api
from dtn_migrate.conf import database
from dtn_migrate.conf import default
from dtn_migrate.conf import engine
from dtn_migrate.conf import glance
from dtn_migrate.conf import peer
from dtn_migrate.conf import protection
from dtn_migrate.conf import rdma
from dtn_migrate.conf import staging
from dtn_migrate.conf import task_flow
from dtn_migrate.conf import tls
from dtn_migrate.conf import transfer

CONF = cfg.CONF

#: The option modules, in the order of the sample configuration; each
#: has register_opts(conf) and list_opts().
MODULES = (default, agent, transfer, tls, rdma, peer, staging, engine,
           task_flow, coordination, protection, database, api, glance)


def register_opts(conf):
    """Register every option group on ``conf``, before it is parsed.

    The [peer:<name>] groups are known only once [agent] peers is read:
    after parsing ``conf``, call ``peer.register_opts(conf)``.
    """
    for module in MODULES:
        if module is not peer:
            module.register_opts(conf)


register_opts(CONF)
