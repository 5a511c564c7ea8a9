"""Which connections the sink holds, and for how long before they
authenticate.

Before a peer proves its key it costs the sink a socket, a thread and
a little memory, and may be anyone.  So the sink

* holds at most ``max_connections`` connections (one thread each);
* of them at most ``max_unauthenticated`` not yet authenticated, and
  at most ``max_per_address`` of those from one source: one IPv4
  address (an IPv4-mapped IPv6 address counts as its IPv4 address), or
  one IPv6 /64, which a single host or site usually holds whole;
  further ones are closed as soon as they are accepted;
* gives each connection ``handshake_timeout`` seconds *in all* to finish
  TLS and the HMAC handshake: a watchdog shuts down the sockets of those
  that are late, however slowly they keep sending (a per-read timeout
  would restart with every byte).

``preferred`` addresses and networks (the peers' configured source
addresses) come first: each counts towards ``max_per_address`` by its
own address, never its /64, and when all ``max_unauthenticated`` slots
are taken a new connection from one of them takes the slot of the
oldest connection still authenticating from anywhere else, which is
closed.  A flood from elsewhere cannot keep the peers out; the peers'
own addresses are still held to ``max_per_address`` each.

Once authenticated, one peer holds at most ``max_per_peer`` connections
(``authenticated`` refuses more), so that no peering takes all of
``max_connections``.
"""

import collections
import ipaddress
import logging
import socket
import threading
import time

LOG = logging.getLogger(__name__)
WATCH_INTERVAL = 0.2
#: The IPv6 prefix whose addresses count as one source.
IPV6_SOURCE_PREFIX = 64


def parse_address(address):
    """``address`` (text) as an ip_address, IPv4-mapped IPv6 as IPv4;
    None if it is no IP address (then it counts as itself).
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def source_of(address):
    """What the pre-auth per-source cap counts ``address`` as: the IPv4
    address, or the IPv6 /64 that holds it.
    """
    ip = parse_address(address)
    if ip is None:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network((ip, IPV6_SOURCE_PREFIX),
                                        strict=False))
    return str(ip)


def networks(addresses):
    """ip_networks of ``addresses`` (addresses or CIDR networks, text);
    ValueError names one that is neither.
    """
    out = []
    for a in addresses:
        try:
            net = ipaddress.ip_network(a.strip(), strict=False)
        except ValueError:
            raise ValueError("%r is not an IP address or network" % a)
        if net.version == 6 and net.prefixlen >= 96 and \
                net.network_address.ipv4_mapped is not None:
            net = ipaddress.ip_network(
                (net.network_address.ipv4_mapped, net.prefixlen - 96))
        out.append(net)
    return tuple(out)


class Ticket:
    """One admitted connection."""

    __slots__ = ("address", "deadline", "_sock", "authenticated", "source",
                 "preferred", "admitted", "peer", "evicted")

    def __init__(self, sock, address, deadline, source, preferred):
        self.address = address
        self.deadline = deadline
        # A duplicate descriptor of the same socket: shutting it down
        # wakes the handler even after TLS wrapped (and took over) the
        # accepted socket object.
        self._sock = sock.dup()
        self.authenticated = False
        self.source = source            # what the per-source cap counts
        self.preferred = preferred
        self.admitted = time.monotonic()
        self.peer = None                # once authenticated
        self.evicted = False

    def shutdown(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self):
        self._sock.close()


class Admission:

    def __init__(self, max_connections, max_unauthenticated,
                 max_per_address, handshake_timeout, max_per_peer=None,
                 preferred=()):
        self.max_connections = max_connections
        self.max_unauthenticated = max_unauthenticated
        self.max_per_address = max_per_address
        self.handshake_timeout = handshake_timeout
        self.max_per_peer = max_per_peer
        self.preferred = networks(preferred)
        self._lock = threading.Lock()
        self._connections = 0
        self._pending = set()                  # tickets not authenticated
        self._per_address = collections.Counter()   # by source_of
        self._per_peer = collections.Counter()      # authenticated
        self.refused = 0
        self.expired = 0
        self.evicted = 0
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._watch,
                                        name="sink-handshakes", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        with self._lock:
            pending = list(self._pending)
        for ticket in pending:
            ticket.shutdown()

    def counts(self):
        with self._lock:
            return {"connections": self._connections,
                    "unauthenticated": len(self._pending),
                    "refused": self.refused, "expired": self.expired,
                    "evicted": self.evicted,
                    "peers": dict(self._per_peer)}

    def is_preferred(self, address):
        ip = parse_address(address)
        return ip is not None and any(ip in net for net in self.preferred)

    def admit(self, sock, address):
        """A Ticket for a newly accepted ``sock``, or (None, reason) when
        a limit is reached.
        """
        preferred = self.is_preferred(address)
        source = str(parse_address(address)) if preferred else \
            source_of(address)
        evicted = None
        with self._lock:
            reason = self._over_limit(source)
            if reason is not None and preferred and \
                    self._connections < self.max_connections and \
                    self._per_address[source] < self.max_per_address:
                # Only the unauthenticated slots are full.
                evicted = self._evict_one()
                if evicted is not None:
                    reason = None
            if reason is not None:
                self.refused += 1
                return None, reason
            ticket = Ticket(sock, address,
                            time.monotonic() + self.handshake_timeout,
                            source, preferred)
            self._connections += 1
            self._pending.add(ticket)
            self._per_address[source] += 1
        if evicted is not None:
            LOG.warning("sink: closing the connection from %s, still "
                        "authenticating, to make room for one from peer "
                        "address %s", evicted.address, address)
            evicted.shutdown()
        return ticket, None

    def _over_limit(self, source):
        if self._connections >= self.max_connections:
            return "%d connections held" % self._connections
        if len(self._pending) >= self.max_unauthenticated:
            return "%d connections still authenticating" % len(self._pending)
        if self._per_address[source] >= self.max_per_address:
            return ("%d connections from %s still authenticating"
                    % (self._per_address[source], source))
        return None

    def _evict_one(self):
        """Take the slot of the oldest unauthenticated connection from a
        source that is not preferred (None if there is none); its handler
        releases it once woken.
        """
        others = [t for t in self._pending if not t.preferred]
        if not others:
            return None
        oldest = min(others, key=lambda t: t.admitted)
        self._forget(oldest)
        oldest.evicted = True
        oldest.deadline = float("inf")
        self.evicted += 1
        return oldest

    def authenticated(self, ticket, peer=None):
        """The connection's peer (``peer``: its name) proved its key: no
        more handshake deadline.  None, or why the connection may not be
        held (the peer's limit of connections is reached, or it was
        closed to make room).
        """
        with self._lock:
            self._forget(ticket)
            if ticket.evicted:
                return "closed to make room for a peer address"
            if peer is not None and self.max_per_peer is not None and \
                    self._per_peer[peer] >= self.max_per_peer:
                self.refused += 1
                return ("peer %s already holds %d connections, this sink's "
                        "limit per peer" % (peer, self._per_peer[peer]))
            ticket.authenticated = True
            if peer is not None:
                ticket.peer = peer
                self._per_peer[peer] += 1
            return None

    def release(self, ticket):
        """The connection is closed."""
        with self._lock:
            self._forget(ticket)
            self._connections -= 1
            if ticket.peer is not None:
                self._per_peer[ticket.peer] -= 1
                if not self._per_peer[ticket.peer]:
                    del self._per_peer[ticket.peer]
                ticket.peer = None
        ticket.close()

    def _forget(self, ticket):
        if ticket in self._pending:
            self._pending.discard(ticket)
            self._per_address[ticket.source] -= 1
            if not self._per_address[ticket.source]:
                del self._per_address[ticket.source]

    def _watch(self):
        while not self._stop.wait(WATCH_INTERVAL):
            now = time.monotonic()
            with self._lock:
                late = [t for t in self._pending if t.deadline <= now]
                for ticket in late:
                    # Its handler releases it once woken.
                    ticket.deadline = float("inf")
                self.expired += len(late)
            for ticket in late:
                LOG.warning("sink: connection from %s did not authenticate "
                            "within %.1f s; closing it", ticket.address,
                            self.handshake_timeout)
                ticket.shutdown()


class AcceptTrouble:
    """A run of failed ``accept()`` calls that may mend (out of
    descriptors or memory, no thread to be had): how long to wait before
    the next try, and what to log, so that the sink neither spins nor
    fails silently nor floods its log.

    The first failure of a run is logged as a warning, then one line
    every ``log_every`` seconds while the run lasts, and its end (the
    next connection accepted) once; the wait doubles from ``first`` to
    ``longest``.
    """

    def __init__(self, name, first=0.05, longest=1.0, log_every=60.0,
                 clock=time.monotonic):
        self.name = name
        self.first = first
        self.longest = longest
        self.log_every = log_every
        self.clock = clock
        self.count = 0          # failures in the run
        self.since = None       # when the run began
        self.logged = None      # when it was last logged

    def failed(self, what):
        """One more failure (``what``: why); the seconds to wait."""
        now = self.clock()
        self.count += 1
        if self.since is None:
            self.since = self.logged = now
            LOG.warning("sink %s: cannot accept connections: %s; trying "
                        "again", self.name, what)
        elif now - self.logged >= self.log_every:
            self.logged = now
            LOG.warning("sink %s: still cannot accept connections: %s "
                        "(%d failures in %.0f s)", self.name, what,
                        self.count, now - self.since)
        return min(self.longest,
                   self.first * 2 ** min(self.count - 1, 32))

    def mended(self):
        """A connection was accepted: the run, if any, is over."""
        if self.since is None:
            return
        LOG.info("sink %s: accepting connections again after %d failures "
                 "in %.1f s", self.name, self.count,
                 self.clock() - self.since)
        self.count = 0
        self.since = self.logged = None
