"""Source side of a transfer (FT-LADS "Source").

One ``SourceTransfer`` moves a dataset to one sink.  It runs *attempts*:
an attempt opens a control connection and ``streams`` data connections,
announces files (NEW_FILE, pipelined), and schedules the objects the
object log does not already hold.  Threads of an attempt:

* the scheduler (the caller's thread, FT-LADS "master"),
* ``io_threads`` readers: pread an object into a pool buffer, xxh3 it
  (and feed the file's sha512 in order, see source.hash), recognise zero
  extents (extents) and compress it when worth it (compress),
* ``streams`` senders: NEW_BLOCK + bytes, NEW_BLOCK_Z + zstd bytes or
  ZERO_BLOCKS on their stream, one buffer per object from read to send,
* the control reader: FILE_ID, BLOCK_SYNC (logged, then the window slot
  is released), BLOCK_NACK (resend), FILE_CLOSE (file verified),
* with RDMA, a reader per stream for BLOCK_PULLED.

At most ``window_bytes`` of objects are between "scheduled" and "logged
durable" at any time, so a crash of either agent costs at most that much
resend.
When an attempt fails (link cut, peer restart, malformed traffic) the
transfer backs off exponentially and starts a new one; the log and the
per-file done sets carry over, in memory and on disk.
"""

import contextlib
import logging
import os
import random
import threading
import time

import tenacity

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import objectlog
from dtn_migrate.transfer import progress
from dtn_migrate.transfer.source import attempt as sourceattempt
from dtn_migrate.transfer.source import flow as sourceflow
from dtn_migrate.transfer.source import hash as sourcehash

from dtn_migrate.transfer.source.attempt import MAX_ZERO_RUN  # noqa: F401
from dtn_migrate.transfer.source.attempt import NO_SHA512  # noqa: F401
from dtn_migrate.transfer.source.attempt import ZERO_COST  # noqa: F401
from dtn_migrate.transfer.source.file import _AttemptFailed
from dtn_migrate.transfer.source.file import Failures
from dtn_migrate.transfer.source.file import _Fatal
from dtn_migrate.transfer.source.file import FileState
from dtn_migrate.transfer.source.file import open_connection  # noqa: F401
from dtn_migrate.transfer.source.file import Peer  # noqa: F401
from dtn_migrate.transfer.source.file import SourceFile
from dtn_migrate.transfer.source.file import TERMINAL
from dtn_migrate.transfer.transport import stream

LOG = logging.getLogger(__name__)

MAX_STATUS_FILES = 1000


class SourceTransfer:
    """A resumable transfer of ``manifest.files`` to ``peer``."""

    def __init__(self, manifest, peer, cfg, state_dir, local_name,
                 rdma_device=None, watermarks=None):
        self.manifest = manifest
        self.peer = peer
        self.cfg = cfg
        self.local_name = local_name
        self.rdma_device = rdma_device
        self.watermarks = watermarks or {}
        self.dir = os.path.join(state_dir, manifest.transfer_id)
        opts = manifest.options
        opts.setdefault("object_size", cfg.object_size)
        self.object_size = int(opts["object_size"])
        if not os.path.exists(os.path.join(self.dir, "manifest.json")):
            manifest.save(self.dir)
        self.hash_dir = os.path.join(self.dir, "hash")
        os.makedirs(self.hash_dir, exist_ok=True)
        self.files = [SourceFile(i, spec, self.object_size, None)
                      for i, spec in enumerate(manifest.files)]
        self.log = objectlog.open_log(
            os.path.join(self.dir, "log"), cfg.logger, cfg.log_method,
            [objectlog.LogFile(f.file_id, f.spec.name, f.nobjects)
             for f in self.files], cfg.transaction_size)
        for f in self.files:
            f.done = self.log.done(f.file_id)
        self.progress = progress.Progress(
            bytes_total=sum(f.spec.size for f in self.files),
            objects_total=sum(f.nobjects for f in self.files),
            files_total=len(self.files))
        self.progress.add(bytes_done=sum(f.done_bytes() for f in self.files),
                          objects_done=sum(len(f.done) for f in self.files))
        self.progress.start()
        self.resumed_bytes = self.progress.bytes_done
        self.state = "pending"
        self.error = None
        self.lock = threading.RLock()
        self._cancel = threading.Event()
        self._attempt = None
        self.wire = progress.Counters()
        self.wire.bytes_sent_wire = 0
        self.wire.objects_zero = 0
        self.wire.objects_compressed = 0
        self.wire.objects_sparse = 0
        self.wire.bytes_hashed_again = 0

    @property
    def transfer_id(self):
        return self.manifest.transfer_id

    # Public API.
    def cancel(self):
        self._cancel.set()
        attempt = self._attempt
        if attempt is not None:
            attempt.wake()

    def status(self):
        snap = self.progress.snapshot()
        snap.update(transfer_id=self.transfer_id, peer=self.peer.name,
                    state=self.state, error=self.error,
                    object_size=self.object_size,
                    window_bytes=self.cfg.window_bytes,
                    resumed_bytes=self.resumed_bytes,
                    bytes_sent_wire=self.wire.bytes_sent_wire,
                    objects_zero=self.wire.objects_zero,
                    objects_compressed=self.wire.objects_compressed,
                    objects_sparse=self.wire.objects_sparse,
                    bytes_hashed_again=self.wire.bytes_hashed_again,
                    files=[f.status() for f in self.files[:MAX_STATUS_FILES]])
        return snap

    def run(self):
        """Transfer until every file is complete or failed; return the
        final status.  Safe to call again after a cancel or failure.
        """
        self.state = "running"
        self._cancel.clear()
        self._check_sources()
        self._start_hashers()
        try:
            self._attempts()
            failed = [f for f in self.files if f.state == FileState.FAILED]
            if failed:
                self.state = "failed"
                self.error = "%d of %d files failed; first: %s: %s" % (
                    len(failed), len(self.files), failed[0].spec.name,
                    failed[0].error)
            else:
                self.state = "complete"
                self.error = None
        except errors.Cancelled:
            self.state = "cancelled"
        except _Fatal as exc:
            self.state = "failed"
            self.error = str(exc)
            LOG.error("transfer %s failed: %s", self.transfer_id, exc)
        finally:
            self._stop_hashers()
            self.log.sync()
            for f in self.files:
                self._close_fd(f)
        if self.state == "complete":
            self.log.destroy()
        LOG.info("transfer %s %s: %s", self.transfer_id, self.state,
                 self.progress.snapshot())
        return self.status()

    def close(self):
        self.log.close()

    # Attempts, with exponential back-off (and jitter) between failed
    # ones.
    def _attempts(self):
        """Run attempts until every file is complete or failed."""
        failures = Failures()
        cfg = self.cfg

        def backoff(retry_state):
            # Doubles with every failure since the last attempt that
            # ended well, up to the maximum.
            exponent = min(failures.count - 1, 32)
            return min(cfg.reconnect_initial_interval * 2 ** exponent,
                       cfg.reconnect_max_interval) * random.uniform(0.8, 1.2)

        tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_AttemptFailed),
            wait=backoff, sleep=self._sleep, before_sleep=self._log_retry,
            reraise=True)(self._attempts_until_failure, failures)

    def _sleep(self, seconds):
        if self._cancel.wait(seconds):
            raise errors.Cancelled("transfer cancelled")

    def _log_retry(self, retry_state):
        LOG.warning("transfer %s: attempt failed (%s); retrying in %.1f s",
                    self.transfer_id, self.error,
                    retry_state.next_action.sleep)

    def _attempts_until_failure(self, failures):
        while not self._all_terminal():
            if self._cancel.is_set():
                raise errors.Cancelled("transfer cancelled")
            done_before = self.progress.bytes_done
            self.progress.add(attempts=1)
            try:
                self._attempt_once(failures)
            except _AttemptFailed:
                if self.progress.bytes_done > done_before:
                    failures.first = None
                    failures.protocol = 0
                now = time.monotonic()
                failures.first = failures.first or now
                if now - failures.first > self.cfg.reconnect_deadline:
                    raise _Fatal("peer %s unreachable for %.0f s: %s"
                                 % (self.peer.name, now - failures.first,
                                    self.error))
                failures.count += 1
                raise
            failures.first = None
            failures.count = 0

    def _attempt_once(self, failures):
        """One attempt; _AttemptFailed when a new one may do better."""
        self._attempt = sourceattempt.Attempt(self)
        try:
            self._attempt.run()
        except errors.Cancelled:
            raise
        except errors.AuthenticationError as exc:
            raise _Fatal(str(exc))
        except errors.PeerError as exc:
            if exc.fatal and exc.code in (errors.Code.AUTH,
                                          errors.Code.VERSION):
                raise _Fatal(str(exc))
            self.error = str(exc)
            raise _AttemptFailed() from exc
        except errors.ProtocolError as exc:
            self.error = str(exc)
            failures.protocol += 1
            if failures.protocol >= 5:
                raise _Fatal("giving up after repeated protocol errors: %s"
                             % exc)
            raise _AttemptFailed() from exc
        except stream.TlsClosed as exc:
            self.error = str(exc)
            failures.tls_closed += 1
            if failures.tls_closed >= 3:
                raise _Fatal("%s, %d times in a row: the peer probably "
                             "rejects this agent's certificate"
                             % (exc, failures.tls_closed))
            raise _AttemptFailed() from exc
        except (ConnectionError, OSError, TimeoutError) as exc:
            self.error = str(exc)
            failures.tls_closed = 0
            raise _AttemptFailed() from exc
        finally:
            self._attempt = None

    # Helpers shared with attempts.
    @contextlib.contextmanager
    def timed_log(self):
        """Account the CPU time spent in the object log (FT overhead);
        thread time, so that waiting for the GIL does not count.
        """
        start = time.thread_time()
        try:
            yield
        finally:
            self.progress.add(log_seconds=time.thread_time() - start)

    def _all_terminal(self):
        return all(f.state in TERMINAL for f in self.files)

    def _close_fd(self, f):
        if f.fd is not None:
            os.close(f.fd)
            f.fd = None
        if f.dfd is not None:
            os.close(f.dfd)
            f.dfd = None

    # Source files: the very files defined, whose content is either
    # unchanged since it was last sent or sent again from its start.
    def _check_sources(self):
        """Between runs: refuse a file replaced since the transfer was
        defined; restart one whose content may have changed.
        """
        bound = False
        for f in self.files:
            if f.state in TERMINAL:
                continue
            fd = self.open_source(f, between_runs=True)
            if fd is not None:
                os.close(fd)
                bound = True
        if bound:
            # The identities bound now (first open, restarted files) hold
            # for the next run too.
            self.manifest.save(self.dir)

    def open_source(self, f, between_runs=False):
        """Open ``f``'s file (no symlink, the file that was defined);
        return its fd, or None once the file failed.  A file whose size,
        mtime or ctime changed is sent again from its start between runs,
        and fails within a run.
        """
        try:
            fd, st = dataset.open_source(f.spec)
        except errors.TransferError as exc:
            self.fail_file(f, str(exc), exc.code)
            return None
        except OSError as exc:
            self.fail_file(f, "cannot open %s: %s" % (f.spec.path, exc))
            return None
        changed = dataset.changes(f.spec, st)
        if not changed or (between_runs and "size" not in changed):
            if changed:
                self._restart_changed(f, changed)
            dataset.bind(f.spec, st)
            return fd
        os.close(fd)
        if "size" in changed:
            message = ("%s is %d bytes, expected %d: it changed since the "
                       "transfer was defined" % (f.spec.path, st.st_size,
                                                 f.spec.size))
        else:
            message = ("%s changed while it was being sent (%s); a new "
                       "run sends it again from its start"
                       % (f.spec.path, ", ".join(changed)))
        self.fail_file(f, message, errors.Code.SOURCE_CHANGED)
        return None

    def _restart_changed(self, f, changed):
        """Forget what was sent of ``f`` and every hash of its old
        content: the next NEW_FILE asks the sink to RESTART it.
        """
        LOG.warning("transfer %s: %s changed since it was last sent (%s); "
                    "sending it again from its start", self.transfer_id,
                    f.spec.path, ", ".join(changed))
        try:
            os.unlink(self._hash_checkpoint(f))
        except FileNotFoundError:
            pass
        if f.spec.sha512 is None:
            f.sha512 = None
            if f.hasher is not None:
                f.hasher = sourcehash.OrderedSha512(
                    self._hash_checkpoint(f), f.spec.size,
                    f.hasher.checkpoint_bytes)
        self.forget(f)
        f.restart = f.changed = True

    def forget(self, f):
        """The sink has no usable partial copy: forget the done set."""
        with self.timed_log():
            self.log.reset(f.file_id)
        self.progress.add(bytes_done=-f.done_bytes(),
                          objects_done=-len(f.done))
        f.done = bitmap.Bitmap(f.nobjects)

    def fail_file(self, f, message, code=errors.Code.IO):
        with self.lock:
            if f.state in TERMINAL:
                return
            f.state = FileState.FAILED
            f.error = message
            f.code = code
        self.progress.add(files_failed=1)
        LOG.error("transfer %s: file %s failed: %s", self.transfer_id,
                  f.spec.name, message)

    def available(self, f):
        """Refresh and return the sendable length of ``f``."""
        if f.spec.growing and f.available < f.spec.size:
            value = dataset.available_bytes(
                f.spec, self.watermarks.get(f.spec.name))
            now = time.monotonic()
            if value > f.available:
                f.available = value
                f.last_growth = now
            elif now - f.last_growth > self.cfg.growing_stall_timeout:
                raise dataset.GrowingFileFailed(
                    "%s has not grown for %.0f s" % (
                        f.spec.name, now - f.last_growth))
        return f.available

    # Source-side sha512 (only for files without a known hash), fed by
    # the readers from the objects they read (see source.hash).
    def _start_hashers(self):
        for f in self.files:
            if f.sha512 is None and self.cfg.verify_sha512 and \
                    f.state not in TERMINAL and f.hasher is None:
                f.hasher = sourcehash.OrderedSha512(
                    self._hash_checkpoint(f), f.spec.size,
                    self.cfg.hash_checkpoint_bytes or (1 << 62))
                self.hash_done(f)

    def _stop_hashers(self):
        """Checkpoint every unfinished hash (a new run resumes there)."""
        for f in self.files:
            h = f.hasher
            if h is not None and not h.complete:
                with h.cond:
                    try:
                        h.save()
                    except OSError as exc:
                        LOG.warning("transfer %s: cannot checkpoint the "
                                    "sha512 of %s: %s", self.transfer_id,
                                    f.spec.name, exc)

    def hash_done(self, f):
        """If ``f``'s hash covers the whole file, take its digest; True
        then.
        """
        h = f.hasher
        if h is None or not h.complete:
            return False
        with self.lock:
            if f.hasher is not h:
                return False
            f.sha512 = h.digest()
            f.hasher = None
            attempt = self._attempt
        h.discard()
        if attempt is not None:
            attempt.declare(f)
        return True

    def _hash_checkpoint(self, f):
        return os.path.join(self.hash_dir, "%d.sha" % f.file_id)


# Old names, still importable from here.
_Attempt = sourceattempt.Attempt
_Window = sourceflow.Window
_TokenBucket = sourceflow.TokenBucket
