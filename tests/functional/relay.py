"""A TCP relay into a network namespace, in the test process.

The test clouds' controllers (engines) live in the root namespace, next
to RabbitMQ and Glance, while nfs-ganesha runs in a lab namespace of its
own.  A relay listens on 127.0.0.1 in the root namespace and connects
each client to a port inside the server's namespace: the socket it
dials is made by a thread that entered that namespace.
"""

import socket

from tests.functional import ganesha
from tests import relay as tcp_relay


class Relay(tcp_relay.Relay):
    """127.0.0.1:<port> here -> ``host:port`` inside namespace ``ns``."""

    def __init__(self, ns, host, port):
        self.ns = ns
        super().__init__((host, port))

    def _dial(self):
        return ganesha.in_netns(self.ns, socket.create_connection,
                                self.upstream, 10)


def nfs_url(server, path="", add_cleanup=None):
    """A libnfs URL reaching ``server`` (a started ganesha.Ganesha) from
    the root namespace through two relays; returns (url, relays).

    ``add_cleanup`` (a test's ``addCleanup``) is given each relay's
    ``close`` as soon as the relay listens.  Without it, a relay made
    before a failure is closed here before the error goes on.
    """
    ns = server.lab.ns(server.ns)
    relays = []
    try:
        for port in (server.nfsport, server.mountport):
            relays.append(Relay(ns, "127.0.0.1", port))
            if add_cleanup is not None:
                add_cleanup(relays[-1].close)
        url = server.url_for(server.ns, path)
    except BaseException:
        if add_cleanup is None:
            for r in relays:
                r.close()
        raise
    base = url.split("?", 1)[0]
    return ("%s?nfsport=%d&mountport=%d" % (base, relays[0].port,
                                            relays[1].port), relays)
