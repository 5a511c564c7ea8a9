"""Transfer progress: bytes, objects, files, rate and ETA."""

import threading
import time


class Counters:
    """Integer counters that engine threads bump with ``add``."""

    def __init__(self):
        self._lock = threading.Lock()

    def add(self, **counts):
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)


class Progress(Counters):
    """Counters updated by the engine threads; ``snapshot`` is safe to
    call from anywhere.  ``bytes_done`` counts bytes the sink has
    confirmed durable (or already held), so it never goes backwards.
    """

    RATE_HALF_LIFE = 2.0

    def __init__(self, bytes_total=0, objects_total=0, files_total=0):
        super().__init__()
        self.bytes_total = bytes_total
        self.objects_total = objects_total
        self.files_total = files_total
        self.bytes_done = 0
        self.objects_done = 0
        self.files_done = 0
        self.files_failed = 0
        self.bytes_sent = 0
        self.bytes_resent = 0
        self.objects_resent = 0
        self.objects_corrupt = 0
        self.log_seconds = 0.0
        self.attempts = 0
        self.started = time.monotonic()
        self._rate = 0.0
        self._last_t = self.started
        self._last_bytes = 0
        self._base = 0

    def start(self):
        """Start the clock and the rate from the current counters."""
        with self._lock:
            self.started = self._last_t = time.monotonic()
            self._last_bytes = self.bytes_done
            self._rate = 0.0
        self._base = self.bytes_done

    def _update_rate(self, now):
        dt = now - self._last_t
        if dt < 0.2:
            return
        inst = (self.bytes_done - self._last_bytes) / dt
        weight = 0.5 ** (dt / self.RATE_HALF_LIFE)
        self._rate = inst if self._rate == 0 else \
            weight * self._rate + (1 - weight) * inst
        self._last_t, self._last_bytes = now, self.bytes_done

    def snapshot(self):
        now = time.monotonic()
        with self._lock:
            self._update_rate(now)
            elapsed = now - self.started
            remaining = max(0, self.bytes_total - self.bytes_done)
            rate = self._rate
            if not rate and elapsed > 0:
                rate = (self.bytes_done - self._base) / elapsed
            return {
                "bytes_total": self.bytes_total,
                "bytes_done": self.bytes_done,
                "objects_total": self.objects_total,
                "objects_done": self.objects_done,
                "files_total": self.files_total,
                "files_done": self.files_done,
                "files_failed": self.files_failed,
                "bytes_sent": self.bytes_sent,
                "bytes_resent": self.bytes_resent,
                "objects_resent": self.objects_resent,
                "objects_corrupt": self.objects_corrupt,
                "log_seconds": round(self.log_seconds, 6),
                "attempts": self.attempts,
                "elapsed": round(elapsed, 3),
                "rate": round(rate, 1),
                "eta": round(remaining / rate, 1) if rate > 0 else None,
                "percent": round(100.0 * self.bytes_done / self.bytes_total,
                                 2) if self.bytes_total else 100.0,
            }
