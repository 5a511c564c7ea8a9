"""Flow control of a source attempt: the window of objects not yet
durable at the sink, and the rate limit on the wire.
"""

import threading
import time


class TokenBucket:
    """Bytes per second on the data streams (what goes on the wire, so
    compressed and zero objects cost what they send).  Thread-safe: each
    sender waits for its own share of the debt.
    """

    def __init__(self, rate):
        self.rate = rate
        self.tokens = 0.0
        self.t = time.monotonic()
        self._lock = threading.Lock()

    def take(self, n, stop):
        if not self.rate:
            return
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.rate,
                              self.tokens + (now - self.t) * self.rate)
            self.t = now
            self.tokens -= n
            debt = -self.tokens
        if debt > 0:
            stop.wait(debt / self.rate)


class Window:
    """Bytes of objects scheduled but not yet confirmed durable."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, n, timeout):
        """Take ``n`` bytes; False on timeout.  An empty window always
        admits one object, whatever its size.
        """
        with self._cond:
            if self.used and self.used + n > self.capacity:
                self._cond.wait(timeout)
                if self.used and self.used + n > self.capacity:
                    return False
            self.used += n
            return True

    def release(self, n):
        if n:
            with self._cond:
                self.used -= n
                self._cond.notify_all()
