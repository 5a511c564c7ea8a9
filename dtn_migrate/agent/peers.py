"""Peer DTNs from the [agent] peers list and their [peer:<name>] sections."""

from oslo_log import log as logging

from dtn_migrate.conf import peer as peer_conf
from dtn_migrate import exception
from dtn_migrate.transfer import auth
from dtn_migrate.transfer import source

LOG = logging.getLogger(__name__)


class PeerRegistry:
    """Keys and addresses of this DTN's peerings."""

    def __init__(self, conf):
        self.conf = conf
        self._peers = {}
        for name in conf.agent.peers:
            group = conf[peer_conf.group_name(name)]
            try:
                key = auth.load_key(text=group.key, path=group.key_file)
            except (OSError, ValueError) as exc:
                raise exception.ConfigError(
                    reason="[peer:%s] key: %s" % (name, exc))
            if key is None:
                raise exception.ConfigError(
                    reason="[peer:%s] needs key or key_file" % name)
            self._peers[name] = (group, key)
        self._client_tls = None
        if any(g.tls for g, _ in self._peers.values()):
            if not conf.tls.ca_file:
                raise exception.ConfigError(
                    reason="a peer has tls = true but [tls] ca_file is unset")
            self._client_tls = auth.client_context(
                conf.tls.ca_file, conf.tls.cert_file, conf.tls.key_file)

    @property
    def names(self):
        return sorted(self._peers)

    def key(self, name):
        """Shared key of peer ``name`` (None if unknown): the sink's
        authentication lookup.
        """
        entry = self._peers.get(name)
        return entry[1] if entry else None

    def require_tls(self, name):
        entry = self._peers.get(name)
        return bool(entry and entry[0].require_tls)

    def source_peer(self, name):
        """Where to send to peer ``name``."""
        entry = self._peers.get(name)
        if entry is None:
            raise exception.PeerNotFound(peer=name,
                                         known=", ".join(self.names) or
                                         "none")
        group, key = entry
        if not group.address:
            raise exception.ConfigError(
                reason="[peer:%s] has no address" % name)
        return source.Peer(name, group.address, group.port, key,
                           self._client_tls if group.tls else None,
                           group.server_name)


def server_tls_context(conf):
    if not conf.tls.cert_file:
        return None
    return auth.server_context(conf.tls.cert_file, conf.tls.key_file,
                               conf.tls.ca_file)
