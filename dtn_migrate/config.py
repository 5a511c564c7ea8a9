"""Command-line and configuration-file parsing for the services."""

from oslo_log import log
import oslo_messaging as messaging

from dtn_migrate import conf as dtn_conf
from dtn_migrate.conf import peer
from dtn_migrate import rpc
from dtn_migrate import version

CONF = dtn_conf.CONF

_DEFAULT_LOG_LEVELS = ['amqp=WARN', 'amqplib=WARN', 'kombu=WARN',
                       'oslo.messaging=INFO', 'oslo_messaging=INFO',
                       'stevedore=WARN', 'cotyledon=WARN', 'urllib3=WARN']


def parse_args(argv, default_config_files=None, configure_logging=True):
    if configure_logging:
        log.register_options(CONF)
        log.set_defaults(default_log_levels=log.get_default_log_levels() +
                         _DEFAULT_LOG_LEVELS)
    messaging.set_transport_defaults(control_exchange=rpc.CONTROL_EXCHANGE)
    CONF(argv[1:], project='dtn-migrate',
         version=version.version_string(),
         default_config_files=default_config_files)
    # Per-peer sections are known only once [agent] peers is read.
    peer.register_opts(CONF)
