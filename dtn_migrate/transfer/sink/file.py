"""What the sink keeps about incoming transfers and their files.

``TransferRecord``: one incoming transfer across sessions (status,
watermarks, statistics), with the file-events ``listener`` of
``SinkServer``.  ``SinkFile``: one announced file of a session, its
partial copy, durable objects and the state of its sha512.
"""

import hashlib
import threading
import time

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import progress
from dtn_migrate.transfer.wire import protocol as P

XATTR_SHA512 = "user.dtn_migrate.sha512"
# Beside <key>.part while that copy, created afresh, has had no object
# reported: a done set announced for it then is stale, and answered RESET.
UNCONFIRMED = ".new"

_local = threading.local()


def partial_key(name):
    """The base name (without suffix) of the partial copy of ``name``
    and its checkpoints, in the transfer's partial directory.
    """
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:40]


def ranges(file_id, indices):
    """(file_id, first, count) triples covering sorted ``indices``."""
    out = []
    first = prev = None
    for i in indices:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if first is not None:
            out.append((file_id, first, prev - first + 1))
        first = prev = i
    if first is not None:
        out.append((file_id, first, prev - first + 1))
    return out


class deferred_events:
    """Within this context, on this thread, file events are collected and
    delivered to the listeners only on exit (when the caller holds no
    sink lock any more).
    """

    def __enter__(self):
        self.outer = getattr(_local, "events", None)
        if self.outer is None:
            _local.events = []
        return self

    def __exit__(self, *exc):
        if self.outer is not None:
            return False
        events, _local.events = _local.events, None
        seen = set()
        for rec, name in events:
            if (id(rec), name) not in seen:
                seen.add((id(rec), name))
                rec.fire(name)
        return False


class TransferRecord(progress.Counters):
    """What the sink knows about one incoming transfer, across sessions,
    for as long as the agent runs (status, watermarks, statistics).

    ``listener(transfer_hex, name)`` hears of every change of a file's
    entry (durable prefix, state, path), with no sink lock held.
    """

    def __init__(self, transfer_hex, peer, listener=None):
        super().__init__()
        self.transfer_id = transfer_hex
        self.peer = peer
        self.listener = listener
        self.lock = self._lock
        self.epoch = 0
        self.sessions = 0
        self.active = False
        self.session = None  # the last SinkSession (maybe closing)
        self.bytes_received = 0
        self.objects_received = 0
        self.objects_written = 0
        self.objects_duplicate = 0
        self.bytes_duplicate = 0
        self.objects_corrupt = 0
        self.files = {}      # name -> dict(size, durable, state, path)
        self.written = {}    # name -> Bitmap of objects ever written
        self.last_error = None
        self.updated = time.time()

    def note_written(self, name, nobjects, index, nbytes, count=1):
        with self.lock:
            seen = self.written.get(name)
            if seen is None or seen.nbits != nobjects:
                seen = self.written[name] = bitmap.Bitmap(nobjects)
            before = len(seen)
            if count == 1:
                seen.add(index)
            else:
                seen.add_range(index, index + count)
            new = len(seen) - before
            self.objects_written += new
            if new < count:
                self.objects_duplicate += count - new
                self.bytes_duplicate += nbytes if count == 1 else 0

    def set_file(self, name, **info):
        with self.lock:
            self.files.setdefault(name, {}).update(info)
            self.updated = time.time()
        events = getattr(_local, "events", None)
        if events is not None:
            events.append((self, name))
        else:
            self.fire(name)

    def fire(self, name):
        if self.listener is None:
            return
        try:
            self.listener(self.transfer_id, name)
        except Exception:  # noqa: B902 - a listener never breaks the sink
            import logging
            logging.getLogger(__name__).exception(
                "sink: file listener failed for %s of transfer %s", name,
                self.transfer_id)

    def snapshot(self, with_files=True):
        with self.lock:
            d = {k: getattr(self, k) for k in (
                "transfer_id", "peer", "sessions", "active",
                "bytes_received", "objects_received", "objects_written",
                "objects_duplicate", "bytes_duplicate", "objects_corrupt",
                "last_error", "updated")}
            states = [f.get("state") for f in self.files.values()]
            d["files_total"] = len(states)
            d["files_done"] = states.count("done")
            d["files_failed"] = states.count("failed")
            if with_files:
                d["files"] = {n: dict(f) for n, f in self.files.items()}
            return d


class SinkFile:
    def __init__(self, msg, parts, key, fd, durable, hasher):
        self.file_id = msg.file_id
        self.name = msg.name
        self.parts = parts
        self.key = key                        # partial file base name
        self.size = msg.size
        self.mtime_ns = msg.mtime_ns
        self.mode = msg.mode & 0o777
        self.object_size = msg.object_size
        self.nobjects = msg.nobjects
        self.flags = P.FileFlags(msg.flags)
        self.verify = not self.flags & P.FileFlags.NO_SHA512
        self.expected = (msg.sha512 if self.flags & P.FileFlags.HAS_SHA512
                         else None)
        self.fd = fd
        # The same file with O_DIRECT (``direct``), for aligned objects;
        # None where the file system takes no direct I/O.
        self.dfd = None
        self.direct_refused = False
        self.durable = durable
        self.hasher = hasher
        self.last_ckpt = hasher.offset if hasher else 0
        # (offset, blob): a hash state taken past the last checkpoint,
        # saved once the durable prefix reaches its offset.
        self.ckpt = None
        self.saved_ckpt = self.last_ckpt
        # A sidecar may exist (resumed copy, or one saved since).
        self.has_sidecar = True
        self.state = "open"       # open, closing, done, mismatch, failed
        self.hashing = False
        self.rehash = False
        self.inflight = 0
        # Objects past the hasher: buffers held for it (index -> buffer),
        # and objects it must read back from the copy (written, buffer
        # gone) or feed as zeros (zero extents).
        self.held = {}
        self.on_disk = bitmap.Bitmap(self.nobjects)
        self.zeros = bitmap.Bitmap(self.nobjects)
        # Created in this session with nothing in it but zeros (then a
        # zero extent needs no punch unless an object was written there).
        self.fresh = False
        self.touched = bitmap.Bitmap(self.nobjects)
        # Its name in the partial directory is not yet known durable.
        self.entry_durable = False
        # Created afresh, and no object of it reported yet (its mark,
        # <key>.new, is in the partial directory).
        self.unconfirmed = False

    @property
    def part(self):
        return self.key + ".part"

    @property
    def sidecar(self):
        return self.key + ".sha"

    def span(self, index):
        return P.object_span(index, self.size, self.object_size)

    def direct_fd(self):
        """The O_DIRECT descriptor to offer, or None."""
        return None if self.direct_refused else self.dfd

    def durable_prefix(self):
        return min(self.size, self.durable.prefix() * self.object_size)

    def next_to_hash(self):
        """Index of the object the hasher needs next."""
        return self.hasher.offset // self.object_size
