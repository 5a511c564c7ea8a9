"""The copy engine's remote copy: staged image bytes off a DTN's export.

*Remote copy* (:class:`StagedStream`): reader threads read a staged file
ahead into a reorder buffer of ``queue_depth`` blocks; the consumer gets
blocks in order as an iterator or through ``read(n)``, hashed on the
way.  It can follow a file that is still growing, and checks the sha512
before it gives out the last block -- or, without its own hash
(``digest=False, until_done=True``), waits for the follower's ``done``.
"""

import hashlib
import logging
import threading
import time

from dtn_migrate.common import polling
from dtn_migrate.common import stall
from dtn_migrate.staging import backend as base
from dtn_migrate.staging import copycommon
from dtn_migrate.staging import watermark
from dtn_migrate.transfer import buffers

LOG = logging.getLogger(__name__)


# Remote copy.

class _Availability:
    """How far a staged file may be read, following a growing file."""

    def __init__(self, name, size, follow, opts, stop):
        self.name = name
        self.size = size
        self.follow = follow
        self.opts = opts
        self.stop = stop
        self.value = size if follow is None else 0
        self.current = name
        self.done = False         # the follower said DONE
        self.lock = threading.Lock()
        self.growth = stall.Stall(opts.stall_timeout)

    def wait_for(self, end):
        """Return once ``end`` bytes may be read (polling the follower)."""
        if self.value >= end:
            return
        polling.poll(lambda: self._available(end),
                     interval=copycommon.poll_waits(self.opts),
                     sleep=self._sleep, done=lambda value: value >= end)

    def _sleep(self, seconds):
        """Until the next poll: ``seconds``, or less once the follower
        says its value may have changed (one with ``wait``).  Raises
        copycommon._Stopping once ``stop`` is set (seen within 0.1 s).
        """
        wait = getattr(self.follow, "wait", None)
        if wait is None:
            copycommon.clean_wait(self.stop, seconds)
            return
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or wait(min(left, 0.1)):
                return
        raise copycommon._Stopping()

    def wait_done(self, check=None):
        """Return once the follower said DONE (the writer verified the
        whole file); a writer that stays complete but unverified for
        ``stall_timeout`` seconds raises CopyStalled.  ``check()`` runs
        before every poll (it raises to give up: a cancel).
        """
        polling.poll(lambda: self._poll_done(check),
                     interval=copycommon.poll_waits(self.opts),
                     sleep=self._sleep)

    def _poll_done(self, check=None):
        if check is not None:
            check()
        with self.lock:
            if not self.done:
                self.poll()
                if not self.done and self.value >= self.size and \
                        self.growth.stalled():
                    raise base.CopyStalled(
                        "%s is complete but its writer has not said it is "
                        "verified for %.0f s" % (self.name,
                                                 self.opts.stall_timeout))
            return self.done

    def _available(self, end):
        with self.lock:
            if self.value < end:
                self.poll()
            return self.value

    def refresh(self):
        """The file's current name, asking the follower first."""
        if self.follow is not None:
            with self.lock:
                self.poll()
        return self.current

    def poll(self):
        reply = tuple(self.follow())
        available, state = reply[0], reply[1]
        if len(reply) > 2 and reply[2]:
            self.current = reply[2]
        if state == watermark.MISMATCH:
            raise base.WriterMismatch(
                "the writer of %s found its sha512 wrong (%s) at %d bytes"
                % (self.name, state, available))
        if state in watermark.FAILED_STATES:
            raise base.WriterFailed(
                "the writer of %s gave up (%s) at %d bytes"
                % (self.name, state, available))
        if state == watermark.DONE:
            available = self.size
            self.done = True
        if available > self.value:
            self.value = min(available, self.size)
            self.growth.moved()
        elif self.value < self.size and self.growth.stalled():
            raise base.CopyStalled(
                "%s has not grown past %d of %d bytes for %.0f s"
                % (self.name, self.value, self.size,
                   self.growth.quiet_for()))


def _read_ahead(stream):
    """Body of one reader thread of a remote copy."""
    follows = stream.avail.follow is not None
    handle = copycommon.ReadHandle(stream.backend, stream.name, stream.opts,
                                   stream.stop,
                                   stream.avail.refresh if follows else None,
                                   stream.note_retry)
    try:
        while True:
            claim = stream.claim()
            if claim is None:
                return
            offset, length = claim
            stream.avail.wait_for(offset + length)
            if stream.pool is None:
                stream.deliver(offset, handle.read(offset, length))
                continue
            buf = stream.take_buffer()
            try:
                data = handle.read(offset, length, into=buf.view)
            except BaseException:
                stream.pool.release(buf)
                raise
            stream.deliver(offset, data, buf)
    finally:
        handle.close()


class StagedStream:
    """The remote copy: staged file ``name`` as a stream of blocks.

    Iterate it for blocks of ``block_size`` (glanceclient accepts it as
    image data), or call :meth:`read`.  With ``follow`` (a follower, see
    :mod:`~dtn_migrate.staging.watermark`) only bytes below the followed
    watermark are read.  The last block is given out only after the
    sha512 of all ``size`` bytes matched ``expected_sha512``; on a
    mismatch :class:`~dtn_migrate.staging.backend.ChecksumMismatch` is
    raised instead.  Threads start at the first read; :meth:`close` (or
    leaving the ``with`` block) stops them.

    ``digest=False`` reads without hashing (``result.sha512`` is None;
    ``expected_sha512`` must then be None).  ``until_done=True`` (needs
    ``follow``) holds the last block back until the follower says
    ``done`` -- for the sink's follower, until the sink verified the
    file's sha512 and installed it -- so a consumer never receives a
    whole file the writer has not vouched for; the writer's
    ``mismatch`` raises
    :class:`~dtn_migrate.staging.backend.WriterMismatch`, a
    ``ChecksumMismatch``.

    ``reuse_buffers=True`` reads each block straight into a page-aligned
    buffer of a small pool (with O_DIRECT where the backend has it) and
    hands out a memoryview of it, with no copy: a block is valid only
    until the next one is asked for.  For a consumer that sends each
    block before it asks for the next (an HTTP upload); :meth:`read`
    copies what it gives.
    """

    def __init__(self, backend, name, size, expected_sha512=None,
                 follow=None, options=None, cancel=None, progress=None,
                 digest=True, until_done=False, reuse_buffers=False):
        if expected_sha512 and not digest:
            raise ValueError("expected_sha512 needs digest=True")
        if until_done and follow is None:
            raise ValueError("until_done needs a follower")
        self.backend = backend
        self.name = base.check_name(name)
        self.size = size
        self.expected = copycommon.digest_hex(expected_sha512)
        self.digest = digest
        self.until_done = until_done
        self.opts = options or copycommon.CopyOptions()
        self.cancel = cancel
        self.progress = progress
        self.stop = threading.Event()
        self.avail = _Availability(self.name, size, follow, self.opts,
                                   self.stop)
        self.result = None
        self._cond = threading.Condition()
        self._slots = threading.Semaphore(self.opts.queue_depth)
        self._next = 0
        self._ready = {}
        self._error = None
        self._retries = 0
        self._threads = []
        # Claimed blocks (at most queue_depth) and the consumer's one.
        self.pool = buffers.BufferPool(
            self.opts.queue_depth + 1, self.opts.block_size) \
            if reuse_buffers else None
        self._gen = self._blocks()
        self._rest = memoryview(b"")

    # Reader side.
    def claim(self):
        """(offset, length) of the next block to read, or None."""
        try:
            copycommon.block_until(
                lambda timeout: self._slots.acquire(timeout=timeout),
                self.stop)
        except copycommon._Stopping:
            return None
        with self._cond:
            offset = self._next
            if offset >= self.size or self.stop.is_set():
                self._slots.release()
                return None
            block = self.opts.block_size
            length = min(block - offset % block, self.size - offset)
            self._next += length
            return offset, length

    def deliver(self, offset, data, buf=None):
        with self._cond:
            self._ready[offset] = (data, buf)
            self._cond.notify_all()

    def take_buffer(self):
        """A free buffer of the pool (raises copycommon._Stopping once
        stopped).
        """
        return copycommon.take_buffer(self.pool, self.stop)

    def note_retry(self):
        with self._cond:
            self._retries += 1

    def _fail(self, exc):
        with self._cond:
            if self._error is None and \
                    not isinstance(exc, copycommon._Stopping):
                self._error = exc
            self.stop.set()
            self._cond.notify_all()

    def _spawn(self, target, name):
        def main():
            try:
                target()
            except BaseException as exc:
                self._fail(exc)
        t = threading.Thread(target=main, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # Consumer side.
    def _check(self):
        if self._error is not None:
            raise self._error
        if self.cancel is not None and self.cancel.is_set():
            raise base.CopyCancelled("reading %s was cancelled" % self.name)

    def _take(self, offset):
        with self._cond:
            self._check()
            while offset not in self._ready:
                self._cond.wait(0.1)
                self._check()
            data = self._ready.pop(offset)
        self._slots.release()
        return data

    def _verify(self, hasher):
        if hasher is None:
            return None
        digest = hasher.hexdigest()
        if self.expected and digest != self.expected:
            raise base.ChecksumMismatch(
                "sha512 of staged %s is %s, expected %s"
                % (self.name, digest, self.expected))
        return digest

    def _start(self):
        if self.avail.follow is None:
            have = self.backend.size(self.name)
            if have != self.size:
                raise base.ShortData(
                    "staged %s has %s bytes on %s, expected %d"
                    % (self.name, have, copycommon.describe(self.backend),
                       self.size))
        self.avail.growth.moved()
        if self.size:
            for i in range(self.opts.readers):
                self._spawn(lambda: _read_ahead(self), "unstage-read-%d" % i)

    def _blocks(self):
        began, last, offset = time.monotonic(), 0.0, 0
        hasher = hashlib.sha512() if self.digest else None
        try:
            self._start()
            if not self.size:
                self._finish(hasher, began)
            while offset < self.size:
                data, buf = self._take(offset)
                if hasher is not None:
                    hasher.update(data)
                offset += len(data)
                if offset == self.size:
                    self._finish(hasher, began)
                else:
                    last = self._report(began, offset, last)
                yield data
                if buf is not None:     # the consumer is done with it
                    self.pool.release(buf)
        finally:
            self._shutdown()

    def _finish(self, hasher, began):
        """Verify, then record the result (before the last block)."""
        digest = self._verify(hasher)
        if self.until_done:
            self.avail.wait_done(self._check)
        self.result = copycommon.CopyResult(self.name, self.size, digest, 0,
                                            self.size,
                                            time.monotonic() - began,
                                            self._retries)
        self._report(began, self.size, 0.0, force=True)

    def _report(self, began, done, last, force=False):
        now = time.monotonic()
        if self.progress is None or (
                not force and now - last < self.opts.progress_interval):
            return last
        try:
            self.progress(copycommon.CopyProgress(self.name, self.size, done,
                                                  done, done, now - began))
        except Exception:
            LOG.exception("progress callback of %s failed", self.name)
        return now

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def read(self, n=-1):
        """Up to ``n`` bytes (all the rest if negative); b"" at the end."""
        if n is None or n < 0:
            rest, self._rest = self._rest.tobytes(), memoryview(b"")
            # bytes() copies a pooled block before the next is read
            # over it (and leaves a bytes block as it is).
            return rest + b"".join(bytes(b) for b in self)
        while not self._rest:
            block = next(self._gen, None)
            if block is None:
                return b""
            if n >= len(block) and isinstance(block, bytes):
                return block        # a whole block: no copy
            self._rest = memoryview(block)
        data, self._rest = self._rest[:n], self._rest[n:]
        return data.tobytes()

    def _shutdown(self):
        self.stop.set()
        if self.pool is not None:
            self.pool.close()
        for t in self._threads:
            t.join()
        self._threads = []

    def close(self):
        """Stop and join the reader threads (idempotent)."""
        try:
            self._gen.close()
        except ValueError:      # running in another thread
            pass
        self._shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_staged(backend, name, size, expected_sha512=None, follow=None,
                options=None, cancel=None, progress=None, digest=True,
                until_done=False, reuse_buffers=False):
    """A :class:`StagedStream` of staged file ``name`` (see there).

    Import side without its own sha512 pass::

        open_staged(backend, name, size, expected_sha512=None,
                    digest=False, until_done=True, reuse_buffers=True,
                    follow=watermark.sink_follower(info, root))
    """
    return StagedStream(backend, name, size, expected_sha512, follow,
                        options, cancel, progress, digest, until_done,
                        reuse_buffers)
