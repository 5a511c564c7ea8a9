"""Hostile clients that never finish authenticating.

A ``Trickler`` opens a TCP connection to a sink from a chosen source
address (any of 127.0.0.0/8 works on loopback, so one test can play many
hosts) and sends the bytes of a real CONNECT frame one at a time, every
``interval`` seconds, reading whatever the sink answers, until the sink
closes the connection.  ``closed_after`` is then how long the sink held
it.  ``Swarm`` runs many at once.
"""

import os
import select
import socket
import threading
import time

from dtn_migrate.transfer.wire import protocol as P


def connect_frame(peer="trickler", header_length=None):
    """The bytes of a valid CONNECT (or of a header that claims a body of
    ``header_length`` bytes, followed by the real body).
    """
    msg = P.Connect(P.VERSION, P.VERSION, P.Role.CONTROL, 0, 0,
                    os.urandom(16), 0, 1 << 20, 1, os.urandom(32), peer)
    frame = P.encode_frame(msg)
    if header_length is not None:
        head = P.HEADER.unpack(frame[:P.HEADER_SIZE])
        frame = P.HEADER.pack(*(head[:4] + (header_length, head[5]))) + \
            frame[P.HEADER_SIZE:]
    return frame


class Trickler(threading.Thread):

    def __init__(self, port, source="127.0.0.1", interval=0.2, data=None,
                 host="127.0.0.1", burst=1):
        super().__init__(daemon=True, name="trickler-%s" % source)
        self.sock = socket.create_connection((host, port), timeout=5,
                                             source_address=(source, 0))
        self.source = source
        self.opened = time.monotonic()
        self.interval = interval
        self.data = connect_frame() if data is None else data
        self.burst = burst
        self.received = b""
        self.closed_after = None
        self.stop = threading.Event()

    def run(self):
        pos = 0
        try:
            while not self.stop.is_set():
                if pos < len(self.data):
                    self.sock.send(self.data[pos:pos + self.burst])
                    pos += self.burst
                if not self._read_for(self.interval):
                    break
        except OSError:
            pass
        self.closed_after = time.monotonic() - self.opened
        self.sock.close()

    def _read_for(self, seconds):
        """Read answers for ``seconds``; False once the sink closed."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            ready, _, _ = select.select([self.sock], [], [], left)
            if ready:
                data = self.sock.recv(65536)
                if not data:
                    return False
                self.received += data

    @property
    def held(self):
        """Still open (as far as this client knows)."""
        return self.closed_after is None


class Swarm:
    """``per_address`` tricklers from each of ``addresses``."""

    def __init__(self, port, addresses, per_address, **kw):
        self.tricklers = [Trickler(port, a, **kw) for a in addresses
                          for _ in range(per_address)]
        for t in self.tricklers:
            t.start()

    def held(self):
        return [t for t in self.tricklers if t.held]

    def held_from(self, address):
        return [t for t in self.held() if t.source == address]

    def wait_all_closed(self, timeout):
        end = time.monotonic() + timeout
        for t in self.tricklers:
            t.join(max(0.0, end - time.monotonic()))
        return self.held()

    def lifetimes(self):
        return sorted(t.closed_after for t in self.tricklers
                      if t.closed_after is not None)

    def close(self):
        for t in self.tricklers:
            t.stop.set()
        for t in self.tricklers:
            t.join(5)
            try:
                t.sock.close()
            except OSError:
                pass
