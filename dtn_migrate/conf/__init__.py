"""oslo.config options of dtn-migrate, one module per option group."""

from oslo_config import cfg

from dtn_migrate.conf import agent
from dtn_migrate.conf import default
from dtn_migrate.conf import engine
from dtn_migrate.conf import glance
from dtn_migrate.conf import peer
from dtn_migrate.conf import rdma
from dtn_migrate.conf import staging
from dtn_migrate.conf import tls
from dtn_migrate.conf import transfer

CONF = cfg.CONF

default.register_opts(CONF)
agent.register_opts(CONF)
transfer.register_opts(CONF)
tls.register_opts(CONF)
rdma.register_opts(CONF)
peer.register_opts(CONF)
staging.register_opts(CONF)
engine.register_opts(CONF)
glance.register_opts(CONF)
