"""zstd per object on the wire (Caps.ZSTD, NEW_BLOCK_Z) and the policy
that decides which objects to compress.

``mode``:

* "off": never.
* "on": every object; the compressed form is kept when it saves at least
  ``min_saving`` of the object.
* "auto": only while the link, not this host, is the limit: the senders
  are behind (objects read and waiting in the send queue) rather than the
  readers.  Compression slows the readers down, the queue drains and
  compression stops until it fills again, so it settles at what the CPU
  can afford.  Objects that do not shrink back it off exponentially
  (a probe every 2, 4, ... 64 objects) so incompressible data costs
  almost nothing.
"""

import threading

try:
    import zstandard
except ImportError:         # pragma: no cover - optional dependency
    zstandard = None

AVAILABLE = zstandard is not None
MAX_SKIP = 64


class Compressor:
    """One per thread (zstd contexts are not thread-safe)."""

    def __init__(self, level):
        self._c = zstandard.ZstdCompressor(level=level)

    def compress(self, view):
        return self._c.compress(view)


def decompress(data, length):
    """Decode ``data`` into exactly ``length`` bytes, never producing
    more (a frame's declared content size is not trusted: a small frame
    may claim, and hold, gigabytes); ValueError if it does not.
    """
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(
            data, read_across_frames=False)
        out = bytearray(length + 1)
        view = memoryview(out)
        got = 0
        while got <= length:
            n = reader.readinto(view[got:])
            if not n:
                break
            got += n
    except zstandard.ZstdError as exc:
        raise ValueError("zstd: %s" % exc) from exc
    if got != length:
        raise ValueError("zstd: decodes to %s bytes, expected %d"
                         % ("more" if got > length else got, length))
    del view
    out.pop()
    return bytes(out)


class Policy:
    """Which objects to try to compress (see module docstring)."""

    def __init__(self, mode, min_saving, backlog=None, backlog_high=1):
        self.mode = mode if AVAILABLE else "off"
        self.min_saving = min_saving
        self._backlog = backlog
        self.backlog_high = backlog_high
        self._lock = threading.Lock()
        self._skip = 0          # objects to pass before the next probe
        self._misses = 0

    @property
    def enabled(self):
        return self.mode != "off"

    def want(self):
        """Try to compress the next object?"""
        if self.mode == "off":
            return False
        if self.mode == "auto" and self._backlog is not None and \
                self._backlog() < self.backlog_high:
            return False        # the senders wait for readers: CPU-bound
        with self._lock:
            if self._skip:
                self._skip -= 1
                return False
        return True

    def worth(self, length, wire_length):
        """Whether ``wire_length`` encoded bytes are worth sending for a
        ``length``-byte object; learns from the answer.
        """
        good = wire_length <= length * (1.0 - self.min_saving)
        if self.mode == "auto":
            with self._lock:
                if good:
                    self._misses = 0
                else:
                    self._misses += 1
                    self._skip = min(MAX_SKIP, 1 << self._misses) - 1
        return good
