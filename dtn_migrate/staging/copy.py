"""The copy engine's local copy: image bytes onto a DTN's export.

*Local copy* (:func:`stage`): a reader thread cuts the source (an
iterator of chunks of any size, a file, or a callable opening either at
an offset; :mod:`~dtn_migrate.staging.blocks`) into blocks, hashes them
with sha512 and hands them through a bounded queue to writer threads.
Each writer has its own :class:`~dtn_migrate.staging.backend.Writer`,
writes at explicit offsets and commits every ``commit_interval /
writers`` bytes; a block is durable once the writer that wrote it
committed.  The calling thread publishes the contiguous durable prefix --
the committed watermark -- to the side file (see
:mod:`~dtn_migrate.staging.watermark`) and to an optional observer, so
the transfer engine can send the file while it is staged.  Memory stays
near ``(queue_depth + writers + 2) * block_size`` plus the uncommitted
bytes (at most ``commit_interval``), which writers keep to write them
again if the export forgets them (reconnect, server reboot).

The last block is written only once the source is known to be exhausted
and the sha512 matches, so a committed watermark equal to the size means
a complete, verified copy.  Failures publish ``failed`` and keep what was
committed; a later call resumes from the watermark (:func:`stage` is
idempotent), and :func:`cleanup` removes the file once the peer has it.

Zeros (``skip_zeros``): before the first write the file is cut at the
resumed prefix and sized (``Writer.truncate``: ftruncate, NFS SETATTR)
and committed, so everything beyond the prefix reads as zeros, whatever
an earlier attempt left there.  All-zero blocks are then not written:
they count as durable at once (the watermark passes them) and stay
holes on the export.  Of a block that holds data only its data runs are
written (:func:`~dtn_migrate.staging.blocks.data_runs`: zeros that fill
64 KiB of the file stay holes, the runs' ends are trimmed to pages), so
a scattered image stages as its data, not as the blocks holding it.
Zeros are still hashed: the sha512 covers every byte.  Backends whose
writers cannot truncate get the zeros written.

Without a digest (``digest=False``) the copy hashes nothing: the caller
has another check of every byte (the transfer's sink compares the file
with the image's sha512), so a committed watermark equal to the size
then means a complete copy, verified later.  Nothing is read back on
resume either.

Resume (``hash_checkpoint``): every ``hash_checkpoint`` bytes the reader
keeps the sha512 state, and once the durable prefix passes it the state
is saved next to the watermark (``<name><suffix>.sha``).  A resumed copy
starts from it and reads back only the committed bytes beyond it.
Damage in the staged prefix before the state is therefore not seen
here; the transfer's sink finds it (it hashes what it receives against
this sha512).
"""

import hashlib
import logging
import queue
import threading
import time

from dtn_migrate.staging import backend as base
from dtn_migrate.staging import blocks
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum

LOG = logging.getLogger(__name__)


# Resume state and housekeeping.

def committed_bytes(backend, name, size=None, suffix=watermark.SUFFIX):
    """Leading bytes of ``name`` a copy can resume after: the published
    watermark, bounded by the file's size; 0 if there is none or the file
    is longer than ``size``.
    """
    mark = watermark.read(backend, name, suffix)
    have = backend.size(name)
    if mark is None or have is None or (size is not None and have > size):
        return 0
    return min(mark[0], have, size if size is not None else have)


def status(backend, name, suffix=watermark.SUFFIX):
    """(committed, failed) as published for ``name``, or None."""
    return watermark.read(backend, name, suffix)


def hash_state_file(name, suffix=watermark.SUFFIX):
    """Side file holding a saved sha512 state of the committed prefix of
    staged file ``name`` (see :func:`stage`).
    """
    return watermark.side_file(name, suffix) + ".sha"


def cleanup(backend, name, suffix=watermark.SUFFIX):
    """Remove a staged file and its side files (idempotent)."""
    side = watermark.side_file(name, suffix)
    sha_side = hash_state_file(name, suffix)
    for victim in (name, side, side + ".tmp", sha_side, sha_side + ".tmp"):
        backend.remove(victim)


# The staged prefix's sha512, and starting over.

def _saved_hash(backend, name, end, opts):
    """The saved sha512 state of ``name`` covering at most ``end`` bytes,
    or a new one.
    """
    if opts.side_file and opts.hash_checkpoint and end:
        try:
            blob = backend.read_small(
                hash_state_file(name, opts.watermark_suffix), limit=1024)
        except base.StagingError as exc:
            LOG.warning("cannot read the saved sha512 state of %s, hashing "
                        "its staged prefix again: %s", name, exc)
            blob = None
        h = checksum.ResumableSha512.restore(bytes(blob)) if blob else None
        if h is not None and h.offset <= end:
            return h
    return checksum.ResumableSha512()


def _prefix_digest(backend, name, end, opts, stop, on_retry=None):
    """sha512 object over the first ``end`` bytes of ``name``: from the
    saved state, only the bytes it does not cover are read.
    """
    h = _saved_hash(backend, name, end, opts)
    handle = copycommon.ReadHandle(backend, name, opts, stop,
                                   on_retry=on_retry)
    try:
        for offset in range(h.offset, end, opts.block_size):
            if stop.is_set():
                raise copycommon._Stopping()
            h.update(handle.read(offset, min(opts.block_size,
                                             end - offset)))
    finally:
        handle.close()
    return h


def staged_sha512(backend, name, size, options=None, cancel=None):
    """Hex sha512 of the first ``size`` bytes of staged ``name``, all
    read back (no saved state is trusted): how an unhashed copy is
    checked once a reader of it found the whole wrong.  Setting
    ``cancel`` stops it with CopyCancelled.
    """
    opts = options or copycommon.CopyOptions()
    stop = cancel or threading.Event()
    h = hashlib.sha512()
    handle = copycommon.ReadHandle(backend, name, opts, stop)
    try:
        for offset in range(0, size, opts.block_size):
            if stop.is_set():
                raise base.CopyCancelled("checking %s was cancelled" % name)
            h.update(handle.read(offset, min(opts.block_size,
                                             size - offset)))
    except copycommon._Stopping:
        raise base.CopyCancelled("checking %s was cancelled" % name)
    finally:
        handle.close()
    return h.hexdigest()


def invalidate(backend, name, suffix=watermark.SUFFIX):
    """Make the next :func:`stage` of ``name`` copy it again from its
    start, into the same file (a transfer defined on it follows the new
    content): the watermark drops to 0 (failed, so that no follower takes
    the old bytes for new ones) and a saved sha512 state goes.
    """
    watermark.publish(backend, name, 0, True, suffix)
    for victim in (hash_state_file(name, suffix),
                   hash_state_file(name, suffix) + ".tmp"):
        backend.remove(victim)


# Local copy.

class _Shared:
    """State shared by the threads of one local copy."""

    def __init__(self, start):
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.error = None
        self.prefix = start       # contiguous durable prefix
        self.durable = {}         # offset -> end, beyond the prefix
        self.read = 0             # bytes handed to writers
        self.written = 0          # bytes written by writers
        self.zeros = 0            # all-zero bytes left unwritten
        self.hash_states = []     # (offset, saved sha512 state) to save
        self.retries = 0
        self.live = 0
        self.digest = None

    def fail(self, exc, stop=True):
        """Record the first error; unless ``stop`` is False, stop."""
        with self.cond:
            if self.error is None and \
                    not isinstance(exc, copycommon._Stopping):
                self.error = exc
            if stop:
                self.stop.set()
            self.cond.notify_all()

    def add(self, **counts):
        with self.cond:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)

    def mark_durable(self, blocks):
        with self.cond:
            for offset, data, *_ in blocks:
                self.durable[offset] = offset + len(data)
            while self.prefix in self.durable:
                self.prefix = self.durable.pop(self.prefix)
            self.cond.notify_all()

    def spawn(self, target, name):
        def main():
            try:
                target()
            except BaseException as exc:
                self.fail(exc)
            finally:
                with self.cond:
                    self.live -= 1
                    self.cond.notify_all()
        with self.cond:
            self.live += 1
        t = threading.Thread(target=main, name=name, daemon=True)
        t.start()
        return t


def _pool_size(opts):
    """Block buffers a local copy may hold at once: the queue, each
    writer's uncommitted blocks (kept to write them again), the block
    each writer and the reader are at, and the held-back last block.
    Allocated as needed, so a small file takes few.
    """
    interval = max(opts.block_size, opts.commit_interval // opts.writers)
    per_writer = -(-interval // opts.block_size) + 1
    return opts.queue_depth + opts.writers * per_writer + 3


class _BlockWriter:
    """One writer thread: its own Writer, and the blocks it wrote since
    its last commit.
    """

    def __init__(self, job):
        self.job = job
        self.writer = None
        self.pending = []
        self.pending_bytes = 0
        self.interval = max(job.opts.block_size,
                            job.opts.commit_interval // job.opts.writers)

    def _retry(self, op, what, reopen=None):
        return copycommon.retrying(self.job.opts, self.job.shared.stop, op,
                                   reopen or self._reopen, what,
                                   lambda: self.job.shared.add(retries=1))

    def _close(self):
        if self.writer is not None:
            writer, self.writer = self.writer, None
            try:
                writer.close()
            except base.StagingError as exc:
                LOG.debug("closing %s: %s", self.job.name, exc)

    def _reopen(self):
        """Open the file again and rewrite what is not committed."""
        self._close()
        self.writer = self.job.backend.open_write(self.job.name,
                                                  sync=self.job.opts.sync)
        for offset, data, _buf, runs in self.pending:
            for at, piece in blocks.pieces(offset, data, runs):
                self.writer.pwrite(piece, at)

    def _write(self, offset, data, buf, runs=None):
        """Write block ``data`` at ``offset``: only its ``runs`` (see
        blocks.data_runs) when given, the sized file holding zeros
        elsewhere.
        """
        # Pending first: a file opened again for a retry gets every
        # piece of the block written again, those before the failed one
        # too.  A block not written whole never becomes durable.
        self.pending.append((offset, data, buf, runs))
        written = 0
        try:
            for at, piece in blocks.pieces(offset, data, runs):
                self._retry(lambda p=piece, a=at: self.writer.pwrite(p, a),
                            "writing %s at %d" % (self.job.name, at))
                written += len(piece)
        except BaseException:
            self.pending.pop()
            raise
        # The whole block is held until committed (the pool's bound).
        self.pending_bytes += len(data)
        self.job.shared.add(written=written, zeros=len(data) - written)
        if self.pending_bytes >= self.interval:
            self._commit()

    def _commit(self):
        if not self.pending:
            return
        self._retry(lambda: self.writer.commit(),
                    "committing %s" % self.job.name)
        self.job.shared.mark_durable(self.pending)
        self.job.release(self.pending)
        self.pending, self.pending_bytes = [], 0

    def _loop(self):
        shared, q = self.job.shared, self.job.queue
        while not shared.stop.is_set():
            try:
                item = q.get(timeout=self.job.opts.commit_idle)
            except queue.Empty:
                self._commit()
                continue
            if item is None:
                self._commit()
                return
            self._write(*item)

    def run(self):
        try:
            self._retry(self._reopen, "opening %s" % self.job.name,
                        reopen=lambda: None)
            self._loop()
        finally:
            self._commit_quietly()
            self._close()

    def _commit_quietly(self):
        """Make what was written durable on the way out, if possible."""
        if self.pending and self.writer is not None:
            try:
                self.writer.commit()
                self.job.shared.mark_durable(self.pending)
            except Exception as exc:
                LOG.debug("final commit of %s: %s", self.job.name, exc)
            self.pending = []


class _LocalCopy:
    """One call of :func:`stage`."""

    def __init__(self, backend, name, size, source, offset, expected,
                 observer, opts, cancel, progress, digest=True):
        self.digest = digest
        self.backend = backend
        self.name = base.check_name(name)
        self.size = size
        self.source = source
        self.offset = offset
        self.expected = copycommon.digest_hex(expected)
        self.observer = observer
        self.opts = opts
        self.cancel = cancel
        self.progress = progress
        self.published = None
        self.shared = None
        self.queue = None
        self.writers = 0
        self.sparse = False       # the file is sized: zeros need no write
        self.hash_saved = 0       # offset of the saved sha512 state

    # Planning.
    def plan(self, committed):
        """Offset to start at (0 means from scratch)."""
        if committed == self.size and \
                self.backend.size(self.name) == self.size:
            return committed
        if blocks.is_restartable(self.source):
            return committed
        offset = self.offset or 0
        if offset > committed:
            raise base.StagingError(
                "cannot stage %s from offset %d: only %d bytes of it are "
                "committed on %s" % (self.name, offset, committed,
                                     copycommon.describe(self.backend)))
        return offset

    def check_space(self, start):
        # What is already there is overwritten (or truncated away); a
        # sized file of an earlier attempt may be mostly holes, so only
        # the resumed prefix counts as there.
        have = min(self.backend.size(self.name) or 0, start)
        need = max(0, self.size - have)
        free = self.backend.free_bytes()
        if need > max(0, free - self.opts.free_margin):
            raise base.NoSpace(
                "not enough space on export %s to stage %s: %d more bytes "
                "needed, %d free, %d of which are kept as margin"
                % (copycommon.describe(self.backend), self.name, need, free,
                   self.opts.free_margin))

    # Publication.
    def publish(self, committed, failed=False):
        if self.published == (committed, failed):
            return
        if self.opts.side_file:
            copycommon.retrying(self.opts, threading.Event(),
                                lambda: watermark.publish(
                                    self.backend, self.name, committed,
                                    failed, self.opts.watermark_suffix),
                                lambda: None,
                                "publishing the watermark of %s"
                                % self.name)
        if self.observer is not None:
            self.observer(committed, failed)
        self.published = (committed, failed)

    def publish_failed(self, committed):
        """Say the copy failed at ``committed`` bytes, wherever possible."""
        error = None
        if self.opts.side_file:
            try:
                watermark.publish(self.backend, self.name, committed, True,
                                  self.opts.watermark_suffix)
            except Exception as exc:
                error = exc
                # A full export cannot take a new side file; the old one
                # can be overwritten in place.
                try:
                    watermark.publish_in_place(
                        self.backend, self.name, committed, True,
                        self.opts.watermark_suffix)
                    error = None
                except Exception as exc2:
                    error = exc2
        if error is not None:
            LOG.error("cannot publish the failure of %s at %d bytes: %s",
                      self.name, committed, error)
        if self.observer is not None:
            self.observer(committed, True)
        self.published = (committed, True)

    # Threads.
    def read_main(self, start):
        hasher = None
        if self.digest:
            hasher = _prefix_digest(self.backend, self.name, start,
                                    self.opts, self.shared.stop,
                                    lambda: self.shared.add(retries=1))
        if start == self.size and start:
            self.verify(hasher)     # already staged: nothing to read
            return
        try:
            self.stream(start, hasher)
        except Exception as exc:
            if isinstance(exc, copycommon._Stopping):
                raise
            # The copy fails, but what was read is still written and
            # committed: a retry resumes after it.
            self.shared.fail(exc, stop=False)
        for _ in range(self.writers):
            self.put(None)

    def stream(self, start, hasher):
        """Blocks of the source from ``start`` to the writers."""
        opened, closer = blocks.open_source(self.source, start)
        try:
            every = self.opts.hash_checkpoint \
                if self.opts.side_file and hasher is not None else 0
            mark = start
            for offset, data, buf in blocks.source_blocks(
                    opened, start, self.size, self.opts.block_size,
                    self.name, self.take_buffer):
                end = offset + len(data)
                if hasher is not None:
                    hasher.update(data)
                if end == self.size:
                    self.verify(hasher)
                elif every and end - mark >= every:
                    state = hasher.save()
                    if state is not None:
                        mark = end
                        with self.shared.cond:
                            self.shared.hash_states.append((end, state))
                runs = blocks.data_runs(data, offset) if self.sparse \
                    else None
                if runs == []:
                    # The sized file reads zeros there already, durably.
                    self.shared.add(read=len(data), zeros=len(data))
                    self.shared.mark_durable([(offset, data)])
                    self.release([(offset, data, buf)])
                    continue
                if runs == [(0, len(data))]:
                    runs = None         # all of it
                self.put((offset, data, buf, runs))
                self.shared.add(read=len(data))
            self.verify(hasher)
        finally:
            if closer is not None:
                closer()

    def verify(self, hasher):
        if hasher is None:
            return      # unhashed copy: checked by whoever reads it
        digest = hasher.hexdigest()
        if self.expected and digest != self.expected:
            raise base.ChecksumMismatch(
                "sha512 of the source of %s is %s, expected %s"
                % (self.name, digest, self.expected))
        self.shared.digest = digest

    def take_buffer(self):
        """A page-aligned block buffer from the copy's pool."""
        return copycommon.take_buffer(self.pool, self.shared.stop)

    def release(self, blocks):
        """Give the pooled buffers of durable ``blocks`` back."""
        for _offset, _data, buf, *_ in blocks:
            if buf is not None:
                self.pool.release(buf)

    def put(self, item):
        def attempt(timeout):
            try:
                self.queue.put(item, timeout=timeout)
            except queue.Full:
                return False
            return True

        copycommon.block_until(attempt, self.shared.stop)

    # Coordination.
    def run(self):
        began = time.monotonic()
        committed = committed_bytes(self.backend, self.name, self.size,
                                    self.opts.watermark_suffix)
        try:
            start = self.plan(committed)
            if start < self.size:
                self.check_space(start)
        except base.StagingError as exc:
            self.publish_failed(committed)
            exc.committed = committed
            raise
        self.shared = _Shared(start)
        self.queue = queue.Queue(self.opts.queue_depth)
        self.pool = buffers.BufferPool(_pool_size(self.opts),
                                       self.opts.block_size)
        try:
            self.prepare(start)
        except Exception as exc:
            self.shared.fail(exc)
            return self.finish(began, start)
        threads = self.start_threads(start)
        try:
            self.watch(began, start)
        finally:
            self.shared.stop.set()
            for t in threads:
                t.join()
        return self.finish(began, start)

    def prepare(self, start):
        """Publish where this copy starts; from scratch, empty the file.

        With ``skip_zeros`` the file is then sized: cut at ``start`` (so
        nothing an earlier attempt wrote beyond the resumed prefix
        survives) and extended to ``size``, which reads as zeros without
        being written.  All-zero blocks then need no write: they are
        durable once this is committed.
        """
        if start == self.size and start:
            return
        self.publish(start)
        if not start and self.opts.side_file:
            # A state saved by an earlier copy under this name must not
            # seed this one's sha512.
            copycommon.retrying(self.opts, self.shared.stop,
                                lambda: self.backend.remove(hash_state_file(
                                    self.name, self.opts.watermark_suffix)),
                                lambda: None,
                                "removing the old sha512 state of %s"
                                % self.name,
                                lambda: self.shared.add(retries=1))
        if self.opts.skip_zeros and self.size:
            self.sparse = copycommon.retrying(
                self.opts, self.shared.stop, lambda: self.size_file(start),
                lambda: None, "%s %s" % ("sizing" if start else "creating",
                                         self.name),
                lambda: self.shared.add(retries=1))
        elif not start:
            copycommon.retrying(self.opts, self.shared.stop,
                                lambda: self.backend.open_write(
                                    self.name, truncate=True).close(),
                                lambda: None, "creating %s" % self.name,
                                lambda: self.shared.add(retries=1))

    def size_file(self, start):
        """Cut the file at ``start`` and size it; False if the backend
        cannot truncate (a file copied from scratch is emptied anyway).
        """
        with self.backend.open_write(self.name, truncate=not start) as w:
            try:
                if start:
                    w.truncate(start)
                w.truncate(self.size)
            except NotImplementedError:
                return False
            w.commit()
        return True

    def start_threads(self, start):
        self.writers = self.opts.writers if start < self.size else 0
        threads = [self.shared.spawn(lambda: self.read_main(start),
                                     "stage-read")]
        for i in range(self.writers):
            w = _BlockWriter(self)
            threads.append(self.shared.spawn(w.run, "stage-write-%d" % i))
        return threads

    def watch(self, began, start):
        shared, last = self.shared, 0.0
        while True:
            with shared.cond:
                shared.cond.wait(min(0.1, self.opts.progress_interval))
                live, prefix = shared.live, shared.prefix
            if self.cancel is not None and self.cancel.is_set():
                shared.fail(base.CopyCancelled(
                    "staging %s was cancelled" % self.name))
            if shared.error is None and start < prefix < self.size:
                try:
                    self.publish(prefix)
                    self.save_hash(prefix)
                except Exception as exc:
                    shared.fail(exc)
            now = time.monotonic()
            if not live or now - last >= self.opts.progress_interval:
                self.report(began, start)
                last = now
            if not live:
                return

    def save_hash(self, prefix):
        """Save the newest sha512 state the durable prefix covers, so a
        resumed copy reads back only what lies beyond it.
        """
        with self.shared.cond:
            states = self.shared.hash_states
            ready = [st for st in states if st[0] <= prefix]
            if not ready:
                return
            self.shared.hash_states = [st for st in states if st[0] > prefix]
        offset, state = ready[-1]
        if offset <= self.hash_saved:
            return
        copycommon.retrying(self.opts, threading.Event(),
                            lambda: self.backend.write_small(
                                hash_state_file(self.name,
                                                self.opts.watermark_suffix),
                                state),
                            lambda: None,
                            "saving the sha512 state of %s" % self.name)
        self.hash_saved = offset

    def report(self, began, start):
        if self.progress is None:
            return
        s = self.shared
        p = copycommon.CopyProgress(self.name, self.size, start + s.read,
                                    s.prefix, s.read,
                                    time.monotonic() - began)
        try:
            self.progress(p)
        except Exception:
            LOG.exception("progress callback of %s failed", self.name)

    def finish(self, began, start):
        s = self.shared
        if s.error is None and s.prefix != self.size:
            s.error = base.StagingError(
                "staging %s stopped at %d of %d bytes" % (
                    self.name, s.prefix, self.size))
        if s.error is not None:
            self.publish_failed(s.prefix)
            try:
                self.save_hash(s.prefix)
            except Exception as exc:
                LOG.warning("cannot save the sha512 state of %s: %s",
                            self.name, exc)
            raise self.explain(s.error, s.prefix)
        self.publish(self.size)
        return copycommon.CopyResult(self.name, self.size, s.digest, start,
                                     s.written, time.monotonic() - began,
                                     s.retries, s.zeros)

    def explain(self, exc, committed):
        """``exc`` with where the copy stopped, as the same class."""
        if not isinstance(exc, base.StagingError):
            return exc
        err = copycommon.restate(
            exc, "staging %s on %s failed with %d of %d bytes "
            "committed: %s" % (self.name, copycommon.describe(self.backend),
                               committed, self.size, exc))
        err.committed = committed
        return err


def stage(backend, name, source, size, offset=None, expected_sha512=None,
          observer=None, options=None, cancel=None, progress=None,
          digest=True):
    """Stage ``size`` bytes from ``source`` as ``name`` on ``backend``.

    ``source`` is an iterable of byte chunks beginning at ``offset``
    (default 0: from scratch), or a restartable source -- a path, a
    seekable file object, or a callable returning chunks or a file object
    for a given offset -- which resumes after the committed watermark by
    itself.  A copy whose watermark already equals ``size`` is only
    re-hashed.  ``observer(committed, failed)`` sees every published
    watermark; ``progress(copycommon.CopyProgress)`` is called every
    ``progress_interval``; setting ``cancel`` stops the copy (a source
    blocked inside its own read is waited for).

    Returns a :class:`~dtn_migrate.staging.copycommon.CopyResult` with
    the sha512 of all ``size`` bytes; with ``digest=False`` nothing is
    hashed (``result.sha512`` is None, ``expected_sha512`` must be
    None): for a caller that has every byte checked further on.  Raises
    NoSpace before writing if the export is too full; on failure
    publishes ``failed``, keeps the committed prefix and raises (staging
    errors carry ``committed``).
    """
    if size < 0:
        raise ValueError("negative size %d" % size)
    if expected_sha512 and not digest:
        raise ValueError("expected_sha512 needs digest=True")
    job = _LocalCopy(backend, name, size, source, offset, expected_sha512,
                     observer, options or copycommon.CopyOptions(), cancel,
                     progress, digest)
    return job.run()
