"""What the local copy (:mod:`~dtn_migrate.staging.copy`) and the
remote copy (:mod:`~dtn_migrate.staging.stream`) share: their options,
results and progress reports, waits that stop when the copy does,
retries of staging requests, and a reader opened again on retryable
errors.
"""

import dataclasses
import logging

from dtn_migrate.staging import backend as base
from dtn_migrate.staging import retry
from dtn_migrate.staging import watermark

LOG = logging.getLogger(__name__)

MiB = 1 << 20


class _Stopping(Exception):
    """Internal signal, not an error: leave a thread because the copy is
    stopping (what stopped it is recorded elsewhere).
    """


@dataclasses.dataclass
class CopyOptions:
    """Tuning of both copies (defaults suit a kernel NFS mount)."""

    block_size: int = 4 * MiB       # bytes per read / write request
    queue_depth: int = 4            # blocks between reader and writers
    writers: int = 2                # local copy: writer threads
    readers: int = 2                # remote copy: reader threads
    commit_interval: int = 64 * MiB  # local copy: bytes between commits
    commit_idle: float = 1.0        # commit when idle this long (s)
    sync: bool = False              # every write stable (O_DSYNC/FILE_SYNC)
    free_margin: int = 256 * MiB    # export space never staged into
    side_file: bool = True          # publish the watermark side file
    watermark_suffix: str = watermark.SUFFIX
    retries: int = 5                # per request, on retryable errors
    retry_initial: float = 0.1      # first backoff (s), then doubling
    retry_max: float = 5.0
    poll_initial: float = 0.05      # remote copy: follow polling (s)
    poll_max: float = 1.0
    stall_timeout: float = 300.0    # followed file not growing (s)
    progress_interval: float = 1.0  # between progress callbacks (s)
    skip_zeros: bool = True         # local copy: zero blocks unwritten
    hash_checkpoint: int = 256 * MiB  # local copy: bytes between saved
    #                                   sha512 states (0: none)

    def __post_init__(self):
        for field in ("block_size", "queue_depth", "writers", "readers",
                      "commit_interval"):
            if getattr(self, field) < 1:
                raise ValueError("%s must be at least 1" % field)


@dataclasses.dataclass
class CopyResult:
    """What a finished copy moved."""

    name: str
    size: int
    sha512: str          # hex digest of all ``size`` bytes
    start: int           # offset this call began at (resumed prefix)
    bytes_copied: int    # bytes this call moved
    seconds: float
    retries: int = 0     # retryable errors overcome
    zero_bytes: int = 0  # all-zero bytes this call did not write

    @property
    def rate(self):
        """Bytes per second moved by this call."""
        return self.bytes_copied / self.seconds if self.seconds else 0.0


@dataclasses.dataclass
class CopyProgress:
    """Handed to progress callbacks."""

    name: str
    size: int
    done: int            # leading bytes processed, resumed prefix included
    committed: int       # durable prefix (local copy), else ``done``
    copied: int          # bytes moved by this call
    elapsed: float

    @property
    def rate(self):
        return self.copied / self.elapsed if self.elapsed else 0.0


def describe(backend):
    """A human name for the export behind ``backend``."""
    for attr in ("description", "where", "url", "root"):
        value = getattr(backend, attr, None)
        if value:
            return str(value)
    return type(backend).__name__


def digest_hex(value):
    return value.lower() if value else None


def poll_waits(opts):
    """Waits between the polls of a followed file."""
    return retry.doubling(opts.poll_initial, opts.poll_max)


def clean_wait(stop, seconds):
    """Sleep unless ``stop`` is set; raise _Stopping if it is."""
    if stop.wait(seconds):
        raise _Stopping()


def block_until(attempt, stop, slice_=0.1):
    """Call ``attempt(timeout)``, a blocking call giving up after
    ``timeout`` seconds, until it returns True; raise _Stopping as soon
    as ``stop`` is set (checked before every call).
    """
    while not stop.is_set():
        if attempt(slice_):
            return
    raise _Stopping()


def take_buffer(pool, stop):
    """A free buffer of ``pool``, waiting for one; raises _Stopping once
    ``stop`` is set.
    """
    got = []

    def attempt(timeout):
        got[:] = [pool.acquire(timeout)]
        return got[0] is not None

    block_until(attempt, stop)
    return got[0]


def restate(exc, message):
    """An error of the class of ``exc`` saying ``message``."""
    try:
        err = type(exc)(message)
    except TypeError:
        err = base.StagingError(message)
    err.__cause__ = exc
    return err


def _retryable(exc):
    return isinstance(exc, base.StagingError) and exc.retryable


def retrying(opts, stop, op, reopen, what, on_retry=None):
    """Run ``op``; on a retryable error, back off, ``reopen`` and try
    again, at most ``opts.retries`` times.
    """
    def attempt(number):
        if number > 1:
            reopen()
        return op()

    try:
        return retry.call(
            attempt, _retryable, retry.tries(opts.retries + 1),
            retry.doubling(opts.retry_initial, opts.retry_max),
            sleep=lambda seconds: clean_wait(stop, seconds),
            before_retry=on_retry and (lambda exc, number: on_retry()),
            what=what)
    except base.StagingError as exc:
        retries = retry.attempts_made(exc) - 1
        if retries:
            raise restate(exc, "%s failed after %d retries: %s"
                          % (what, retries, exc))
        raise


class ReadHandle:
    """A Reader of one thread, opened again on retryable errors.

    ``name_of()`` gives the name to (re)open: a followed file may have
    been renamed.
    """

    def __init__(self, backend, name, opts, stop, name_of=None,
                 on_retry=None):
        self.backend = backend
        self.name = name
        self.opts = opts
        self.stop = stop
        self.follows = name_of is not None
        self.name_of = name_of or (lambda: name)
        self.on_retry = on_retry
        self.reader = None

    def close(self):
        if self.reader is not None:
            reader, self.reader = self.reader, None
            try:
                reader.close()
            except base.StagingError as exc:
                LOG.debug("closing %s: %s", self.name, exc)

    def _reopen(self):
        self.close()
        self.reader = self.backend.open_read(self.name_of())

    def _pread(self, offset, length, into=None):
        if self.reader is None:
            self._reopen()
        if into is not None:
            return self._readinto(into, offset, length)
        parts, done = [], 0
        while done < length:
            data = self.reader.pread(length - done, offset + done)
            if not data:
                raise base.ShortData("staged %s ends at %d, before %d"
                                     % (self.name, offset + done,
                                        offset + length))
            parts.append(data)
            done += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _readinto(self, view, offset, length):
        done = 0
        while done < length:
            n = self.reader.readinto(view[done:], offset + done,
                                     length - done)
            if not n:
                raise base.ShortData("staged %s ends at %d, before %d"
                                     % (self.name, offset + done,
                                        offset + length))
            done += n
        return view[:length]

    def read(self, offset, length, into=None):
        """Exactly ``length`` bytes at ``offset``; with ``into`` (a
        writable buffer of at least ``length`` bytes, page-aligned for
        O_DIRECT), read there and return its first ``length`` bytes.

        A followed file is renamed once complete (the sink installs its
        partial copy), and its follower may give the new name only some
        time later: a followed file not found is looked for again, under
        the name the follower gives, for up to ``stall_timeout`` seconds.
        """
        def attempt(number):
            return retrying(self.opts, self.stop,
                            lambda: self._pread(offset, length, into),
                            self._reopen,
                            "reading %s at %d" % (self.name, offset),
                            self.on_retry)

        if not self.follows:
            return attempt(1)
        stop, wait = retry.deadline(self.opts.stall_timeout,
                                    poll_waits(self.opts))
        try:
            return retry.call(
                attempt, lambda exc: isinstance(exc, base.StagingNotFound),
                stop, wait, sleep=self._sleep,
                before_retry=lambda exc, number: self.close())
        except base.StagingNotFound as exc:
            if retry.attempts_made(exc) == 1:
                raise
            raise restate(exc, "staged %s not found under the name its "
                               "follower gives for %.0f s: %s"
                          % (self.name, self.opts.stall_timeout, exc))

    def _sleep(self, seconds):
        clean_wait(self.stop, seconds)
