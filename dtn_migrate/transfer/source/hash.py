"""The source's sha512 of a file, fed from the objects read for sending.

A file without a given sha512 is hashed once, by the readers that read
its objects to send them: each reader feeds its object when the hash has
reached the object's offset (objects are read in parallel, so a reader
may wait for the one before it; every reader holds its buffer before it
takes an object, so the object the hash waits for is always being read).
Zero extents are fed as zeros.  What nobody will send in this attempt
(objects the sink already holds, after a restart whose checkpoint is
older) is read here, once: the gap between the checkpoint and the next
object to send.  The state is checkpointed (ResumableSha512) every
``checkpoint_bytes`` and when the transfer stops, so a new run re-reads
only what the checkpoint does not cover.
"""

import os
import threading

from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import durable

POLL = 0.05


class OrderedSha512:

    def __init__(self, path, size, checkpoint_bytes):
        self.path = path
        self.size = size
        self.checkpoint_bytes = checkpoint_bytes
        self.cond = threading.Condition()
        h = None
        try:
            with open(path, "rb") as fh:
                h = checksum.ResumableSha512.restore(fh.read())
        except FileNotFoundError:
            pass
        if h is not None and h.offset > size:
            h = None
        self.h = h or checksum.ResumableSha512()
        self.resumed_from = self.h.offset
        self._saved = self.h.offset
        self.bytes_gap_read = 0

    @property
    def offset(self):
        return self.h.offset

    @property
    def complete(self):
        return self.h.offset >= self.size

    def feed(self, offset, view, fill_gap, give_up):
        """Feed ``view``, the bytes at ``offset``, once the hash reached
        ``offset``.  Meanwhile ``fill_gap(hash_offset, self)`` may feed
        the bytes at the hash's offset (returning True) when nobody else
        will; ``give_up()`` ends the wait.  Returns True once the hash
        covers the bytes.
        """
        with self.cond:
            while self.h.offset < offset:
                if give_up():
                    return False
                if not fill_gap(self.h.offset, self):
                    self.cond.wait(POLL)
            end = offset + len(view)
            if end > self.h.offset:
                self._update(view[self.h.offset - offset:])
            return True

    def update_at(self, offset, view):
        """Feed bytes at ``offset`` (the hash's offset; lock held)."""
        if offset == self.h.offset:
            self._update(view)

    def _update(self, view):
        self.h.update(view)
        if self.h.offset - self._saved >= self.checkpoint_bytes:
            self.save()
        self.cond.notify_all()

    def digest(self):
        return self.h.digest()

    def save(self):
        blob = self.h.save()
        if blob is None:
            return
        durable.write_atomic(self.path, blob)
        self._saved = self.h.offset

    def discard(self):
        for path in (self.path, self.path + ".tmp"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


class ZeroSource:
    """Zero bytes to feed for zero extents (a writable, never written
    buffer, so that the sha512 reads it in place).
    """

    def __init__(self, size):
        self.view = buffers.aligned(size)
