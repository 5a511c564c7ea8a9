"""Sink side of "hash each byte once": the sha512 of a file's
contiguous prefix, fed from the buffers the objects arrived in.

Each object written is offered to its file's hasher with its buffer.
The object the hasher needs next is hashed at once (on the I/O thread
that wrote it); objects that arrive ahead of it keep their buffers for
it while the session holds fewer than ``hold_limit`` of them, and are
otherwise released and marked to be read back from the partial copy when
the prefix reaches them (the only re-reads).  Zero extents are fed as
zeros.  A copy resumed with a hash checkpoint starts from it: only its
objects past the checkpoint are read back.

A checkpoint is saved only for a prefix that is already durable (a
restart compares it with the done set): a state taken past the durable
prefix waits for the sync batch that makes its offset durable.
"""

import errno
import logging
import mmap
import os
import threading

from dtn_migrate.transfer import buffers

LOG = logging.getLogger(__name__)

HASH_CHUNK = 4 << 20
# At most this many objects of zeros are hashed between two looks at
# the file's state (a failed or replaced file stops soon).
ZERO_STEP = 64
_local = threading.local()
_zeros = None
_zeros_lock = threading.Lock()


def scratch(size=HASH_CHUNK):
    """A page-aligned buffer of at least ``size`` bytes, one per thread."""
    buf = getattr(_local, "buf", None)
    if buf is None or len(buf) < size:
        buf = _local.buf = buffers.aligned(max(size, HASH_CHUNK))
    return buf


def zeros():
    """HASH_CHUNK zero bytes, writable (ResumableSha512 copies read-only
    buffers) and never written.
    """
    global _zeros
    with _zeros_lock:
        if _zeros is None:
            _zeros = memoryview(mmap.mmap(-1, HASH_CHUNK))
        return _zeros


class HashMixin:
    """SinkSession's prefix hashing (needs: lock, pool, cfg, held_count,
    hold_limit, ckpt_lock, pdir, closed, _fail, _maybe_finalize,
    _task_done, server.hash_io).
    """

    def _offer(self, f, index, buf):
        """Object ``index`` of ``f`` was written from ``buf``: hash it now,
        keep ``buf`` for the hasher or let it go (lock not held).  Takes
        ownership of ``buf``.
        """
        start = False
        with self.lock:
            keep = f.hasher is not None and f.state == "open" and \
                f.fd is not None
            if keep:
                nxt = f.next_to_hash()
                if index < nxt or index in f.held:
                    keep = False
                elif index == nxt or self.held_count < self.hold_limit:
                    f.held[index] = buf
                    self.held_count += 1
                else:
                    f.on_disk.add(index)
                    keep = False
                start = not f.hashing
                if start:
                    f.hashing = True
        if not keep:
            self.pool.release(buf)
        if start:
            self._hash(f)

    def _offer_zeros(self, f, index, count):
        """Objects ``index`` .. ``index + count - 1`` read as zeros."""
        with self.lock:
            if f.hasher is None or f.state != "open":
                return
            f.zeros.add_range(index, index + count)
            start = not f.hashing
            if start:
                f.hashing = True
        if start:
            self._hash(f)

    def _kick_hash(self, f):
        """Have the hasher catch up with what the copy holds already (a
        resumed copy), on a hash thread.
        """
        with self.lock:
            if f.hasher is None or f.hashing or f.state != "open":
                return
            nxt = f.next_to_hash()
            if f.hasher.offset >= f.size or nxt not in f.on_disk:
                return
            f.hashing = True
            self.tasks += 1
        try:
            self.server.hash_io.submit(self._hash_task, f)
        except RuntimeError:
            with self.lock:
                f.hashing = False
            self._task_done()

    def _hash_task(self, f):
        try:
            self._hash(f)
        finally:
            self._task_done()

    def _next_piece(self, f):
        """What the hasher feeds next (lock held): ("buf", buffer),
        ("zeros", count), ("read", None), or None (nothing yet; the
        hashing flag is then dropped).
        """
        if f.state != "open" or self.closed or f.fd is None or \
                f.hasher.offset >= f.size:
            return None
        nxt = f.next_to_hash()
        buf = f.held.pop(nxt, None)
        if buf is not None:
            self.held_count -= 1
            return "buf", buf
        stale = [i for i in f.held if i < nxt]
        if stale:
            # Copies of objects hashed meanwhile (resent after a
            # reconnect): their buffers go back to the pool.
            self.held_count -= len(stale)
            return "release", [f.held.pop(i) for i in stale]
        if nxt in f.zeros:
            n = 1
            while n < ZERO_STEP and nxt + n in f.zeros and \
                    nxt + n not in f.held:
                n += 1
            return "zeros", n
        if nxt in f.on_disk:
            return "read", None
        return None

    def _hash(self, f):
        """Feed the hasher while its next object is at hand (the caller
        set ``f.hashing``; it is cleared here).
        """
        failed = None
        while True:
            with self.lock:
                piece = self._next_piece(f)
                if piece is None:
                    f.hashing = False
                    dead = f.state != "open"
                    break
            kind, arg = piece
            offset = f.hasher.offset
            try:
                if kind == "release":
                    for buf in arg:
                        self.pool.release(buf)
                    continue
                if kind == "buf":
                    try:
                        f.hasher.update(arg.view[:f.span(
                            offset // f.object_size)[1]])
                    finally:
                        self.pool.release(arg)
                elif kind == "zeros":
                    end = min(f.size, offset + arg * f.object_size)
                    zero = zeros()
                    while f.hasher.offset < end:
                        f.hasher.update(zero[:min(HASH_CHUNK,
                                                  end - f.hasher.offset)])
                else:
                    self._hash_from_disk(f, offset)
                self._checkpoint(f)
            except OSError as exc:
                with self.lock:
                    f.hashing = False
                failed = exc
                dead = True
                break
        if dead:
            self._drop_held(f)
        if failed is not None:
            self._fail(f, failed)
            return
        self._maybe_finalize(f)

    def _hash_from_disk(self, f, offset):
        _, length = f.span(offset // f.object_size)
        view = scratch(length)
        with self.lock:
            if f.fd is None:
                return
            fd = os.dup(f.fd)
        try:
            done = 0
            while done < length:
                n = os.preadv(fd, [view[done:length]], offset + done)
                if n <= 0:
                    raise OSError(errno.EIO, "partial copy is short")
                done += n
        finally:
            os.close(fd)
        f.hasher.update(view[:length])

    def _drop_held(self, f):
        """Release the buffers kept for ``f``'s hasher."""
        with self.lock:
            bufs = list(f.held.values())
            f.held.clear()
            self.held_count -= len(bufs)
        for buf in bufs:
            self.pool.release(buf)

    # Checkpoints.
    def _checkpoint(self, f):
        """Every ``hash_checkpoint_bytes``: save the state if its prefix
        is durable, else keep it for the sync that makes it so.
        """
        offset = f.hasher.offset
        if offset - f.last_ckpt < self.cfg.hash_checkpoint_bytes and \
                offset < f.size:
            return
        if offset >= f.size:
            return          # hashed whole: the file is about to close
        blob = f.hasher.save()
        f.last_ckpt = offset
        if blob is None:
            return
        if offset <= f.durable_prefix():
            self._save_blob(f, offset, blob)
        else:
            f.ckpt = (offset, blob)

    def _durable_checkpoint(self, f):
        """After a sync batch: save the kept state if now durable."""
        ckpt = f.ckpt
        if ckpt is not None and ckpt[0] <= f.durable_prefix():
            f.ckpt = None
            try:
                self._save_blob(f, *ckpt)
            except OSError as exc:
                LOG.warning("sink: transfer %s: hash checkpoint of %s not "
                            "saved: %s", self.transfer_id, f.name, exc)

    def _save_hash(self, f):
        blob = f.hasher.save()
        if blob is not None:
            self._save_blob(f, f.hasher.offset, blob)
            f.last_ckpt = max(f.last_ckpt, f.hasher.offset)

    def _save_blob(self, f, offset, blob):
        with self.ckpt_lock:
            if offset <= f.saved_ckpt:
                return
            tmp = f.sidecar + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                         os.O_NOFOLLOW, 0o600, dir_fd=self.pdir)
            try:
                os.write(fd, blob)
                # Durable before its name: a rename that outlives a power
                # cut must never name an empty or torn checkpoint.
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, f.sidecar, src_dir_fd=self.pdir,
                      dst_dir_fd=self.pdir)
            f.saved_ckpt = offset
            f.has_sidecar = True
