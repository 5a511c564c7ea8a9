"""[peer:<name>] options, one section per peer DTN in [agent] peers.

Like Cinder's per-backend sections, these groups are registered at run
time from the list of names; the sample configuration shows the options
under a ``[peer:<name>]`` placeholder.
"""

from oslo_config import cfg

SAMPLE_GROUP = 'peer:<name>'

peer_opts = [
    cfg.HostAddressOpt('address', help='Address of the peer DTN agent.'),
    cfg.PortOpt('port', default=47100,
                help='Transfer port of the peer DTN agent.'),
    cfg.StrOpt('key', secret=True,
               help='Shared HMAC key of this peering (hex or text, at least '
                    '16 bytes). Both DTNs of the pair hold the same key.'),
    cfg.StrOpt('key_file',
               help='File holding the key, instead of "key".'),
    cfg.BoolOpt('tls', default=False,
                help='Use TLS when sending to this peer (needs [tls] '
                     'ca_file).'),
    cfg.BoolOpt('require_tls', default=False,
                help='Refuse plain TCP connections from this peer.'),
    cfg.StrOpt('server_name',
               help='Name expected in the peer\'s TLS certificate; default: '
                    'its address.'),
]


def group_name(name):
    return 'peer:%s' % name


def register_opts(conf):
    """Register [peer:<name>] for every name in [agent] peers."""
    try:
        names = conf.agent.peers
    except cfg.Error:
        return
    for name in names or ():
        conf.register_opts(peer_opts, group=group_name(name))


def list_opts():
    return {SAMPLE_GROUP: peer_opts}
