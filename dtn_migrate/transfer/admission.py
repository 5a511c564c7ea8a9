"""Which connections the sink holds, and for how long before they
authenticate.

Before a peer proves its key it costs the sink a socket, a thread and
a little memory, and may be anyone.  So the sink

* holds at most ``max_connections`` connections (one thread each);
* of them at most ``max_unauthenticated`` not yet authenticated, and
  at most ``max_per_address`` of those from one source address: further
  ones are closed as soon as they are accepted;
* gives each connection ``handshake_timeout`` seconds *in all* to finish
  TLS and the HMAC handshake: a watchdog shuts down the sockets of those
  that are late, however slowly they keep sending (a per-read timeout
  would restart with every byte).
"""

import collections
import logging
import socket
import threading
import time

LOG = logging.getLogger(__name__)
WATCH_INTERVAL = 0.2


class Ticket:
    """One admitted connection."""

    __slots__ = ("address", "deadline", "_sock", "authenticated")

    def __init__(self, sock, address, deadline):
        self.address = address
        self.deadline = deadline
        # A duplicate descriptor of the same socket: shutting it down
        # wakes the handler even after TLS wrapped (and took over) the
        # accepted socket object.
        self._sock = sock.dup()
        self.authenticated = False

    def shutdown(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self):
        self._sock.close()


class Admission:

    def __init__(self, max_connections, max_unauthenticated,
                 max_per_address, handshake_timeout):
        self.max_connections = max_connections
        self.max_unauthenticated = max_unauthenticated
        self.max_per_address = max_per_address
        self.handshake_timeout = handshake_timeout
        self._lock = threading.Lock()
        self._connections = 0
        self._pending = set()                  # tickets not authenticated
        self._per_address = collections.Counter()
        self.refused = 0
        self.expired = 0
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
                    "refused": self.refused, "expired": self.expired}

    def admit(self, sock, address):
        """A Ticket for a newly accepted ``sock``, or (None, reason) when
        a limit is reached.
        """
        with self._lock:
            reason = self._over_limit(address)
            if reason is not None:
                self.refused += 1
                return None, reason
            ticket = Ticket(sock, address,
                            time.monotonic() + self.handshake_timeout)
            self._connections += 1
            self._pending.add(ticket)
            self._per_address[address] += 1
            return ticket, None

    def _over_limit(self, address):
        if self._connections >= self.max_connections:
            return "%d connections held" % self._connections
        if len(self._pending) >= self.max_unauthenticated:
            return "%d connections still authenticating" % len(self._pending)
        if self._per_address[address] >= self.max_per_address:
            return ("%d connections from %s still authenticating"
                    % (self._per_address[address], address))
        return None

    def authenticated(self, ticket):
        """The peer proved its key: no more handshake deadline."""
        with self._lock:
            self._forget(ticket)
            ticket.authenticated = True

    def release(self, ticket):
        """The connection is closed."""
        with self._lock:
            self._forget(ticket)
            self._connections -= 1
        ticket.close()

    def _forget(self, ticket):
        if ticket in self._pending:
            self._pending.discard(ticket)
            self._per_address[ticket.address] -= 1
            if not self._per_address[ticket.address]:
                del self._per_address[ticket.address]

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
