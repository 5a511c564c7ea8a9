"""[tls] options: certificates for encrypted DTN-to-DTN streams."""

from oslo_config import cfg

from dtn_migrate.conf import utils

tls_group = cfg.OptGroup(
    'tls', title='TLS for peer connections',
    help='TLS encrypts transfers on links outside a Science DMZ. The sink '
         'accepts TLS and plain connections on one port and can require '
         'TLS per peer ([peer:<name>] require_tls). Peers authenticate '
         'with their HMAC key in both cases; with ca_file set, the sink '
         'also requires client certificates (mutual TLS). TLS is off '
         'until it is turned on for a peer ([peer:<name>] tls = true, '
         'with ca_file set here); DevStack turns it on.')

tls_opts = [
    cfg.StrOpt('cert_file',
               help='PEM certificate this agent presents, as sink and as '
                    'source.'),
    cfg.StrOpt('key_file', help='PEM private key of cert_file.'),
    cfg.StrOpt('ca_file',
               help='PEM CA bundle that peer certificates must chain to.'),
]


def register_opts(conf):
    utils.register(conf, tls_group, tls_opts)


def list_opts():
    return {tls_group: tls_opts}
