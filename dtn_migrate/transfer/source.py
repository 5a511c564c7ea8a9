"""Source side of a transfer (FT-LADS "Source").

One ``SourceTransfer`` moves a dataset to one sink.  It runs *attempts*:
an attempt opens a control connection and ``streams`` data connections,
announces files (NEW_FILE, pipelined), and schedules the objects the
object log does not already hold.  Threads of an attempt:

* the scheduler (the caller's thread, FT-LADS "master"),
* ``io_threads`` readers: pread an object into a pool buffer, xxh3 it
  (and feed the file's sha512 in order, see sourcehash), recognise zero
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

import collections
import contextlib
import enum
import logging
import os
import queue
import random
import threading
import time

import tenacity

from dtn_migrate.transfer import auth
from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import compress
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import extents
from dtn_migrate.transfer import handshake
from dtn_migrate.transfer import objectlog
from dtn_migrate.transfer import progress
from dtn_migrate.transfer import protocol as P
from dtn_migrate.transfer import sourcehash
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.transport import tcp

LOG = logging.getLogger(__name__)

NO_SHA512 = bytes(64)
POLL = 0.05
MAX_STATUS_FILES = 1000
# Window held by an object sent as a zero extent: what it costs to resend
# is a few bytes of ZERO_BLOCKS, not its length.
ZERO_COST = 4096
# Objects in one ZERO_BLOCKS.
MAX_ZERO_RUN = 4096


class FileState(enum.Enum):
    PENDING = "pending"        # not announced in the current attempt
    ANNOUNCED = "announced"    # NEW_FILE sent, FILE_ID awaited
    OPEN = "open"              # objects flowing
    COMPLETE = "complete"      # sink verified it (FILE_CLOSE OK or SKIP)
    FAILED = "failed"


TERMINAL = (FileState.COMPLETE, FileState.FAILED)


class Peer:
    """Where and how to reach a sink."""

    def __init__(self, name, host, port, key, tls_context=None,
                 server_hostname=None):
        self.name = name
        self.host = host
        self.port = int(port)
        self.key = key
        self.tls_context = tls_context
        self.server_hostname = server_hostname

    def __repr__(self):
        return "<Peer %s %s:%d>" % (self.name, self.host, self.port)


def open_connection(peer, connect, cfg, timeout=None, buffer_bytes=0):
    """Connect to ``peer`` and authenticate with ``connect`` (a Connect).

    Returns (connection, the sink's ConnectAck); the connection keeps
    ``timeout`` (default: ``cfg.connect_timeout``) and is closed if the
    handshake fails.  With ``cfg.frame_auth`` it asks for frame
    authentication, and every later frame is tagged (see auth).
    """
    timeout = cfg.connect_timeout if timeout is None else timeout
    if cfg.frame_auth:
        connect.caps |= P.Caps.FRAME_AUTH
    conn = stream.connect(peer.host, peer.port, timeout, buffer_bytes,
                          cfg.tcp_user_timeout, peer.tls_context,
                          peer.server_hostname)
    try:
        conn.settimeout(timeout)
        ack = handshake.client(conn, connect, peer.key)
    except BaseException:
        conn.close()
        raise
    return conn, ack


class SourceFile:
    def __init__(self, file_id, spec, object_size, done):
        self.file_id = file_id
        self.spec = spec
        self.object_size = object_size
        self.nobjects = P.object_count(spec.size, object_size)
        self.done = done                    # durable at the sink
        self.sent = bitmap.Bitmap(self.nobjects)  # sent by this process
        self.state = FileState.PENDING
        self.error = None
        self.code = errors.Code.NONE
        self.restart = False
        self.changed = False      # its content changed between runs
        self.file_retries = 0
        self.nacks = collections.Counter()
        self.sha512 = bytes.fromhex(spec.sha512) if spec.sha512 else None
        self.hasher = None        # sourcehash.OrderedSha512 while hashing
        self.fd = None
        self.available = 0 if spec.growing else spec.size
        self.last_growth = time.monotonic()
        # Per attempt.
        self.pending = collections.deque()
        self.outstanding = set()      # window held, one slot per index
        self.light = set()            # of those, held at ZERO_COST
        self.declared = False
        # Bumped when the file is announced again (RESTART): objects
        # queued for an older announcement are dropped, not sent.
        self.generation = 0

    def span(self, index):
        return P.object_span(index, self.spec.size, self.object_size)

    def done_bytes(self):
        if self.done.full:
            return self.spec.size
        n = len(self.done) * self.object_size
        last = self.nobjects - 1
        if last in self.done:
            n -= self.object_size - self.span(last)[1]
        return n

    def status(self):
        return {"name": self.spec.name, "size": self.spec.size,
                "state": self.state.value, "bytes_done": self.done_bytes(),
                "sha512": self.sha512.hex() if self.sha512 else None,
                "error": self.error}


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
        failures = _Failures()
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
        self._attempt = _Attempt(self)
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
    # the readers from the objects they read (see sourcehash).
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


class _Fatal(Exception):
    """Ends a transfer without further retries."""


class _Stop(Exception):
    pass


class _AttemptFailed(Exception):
    """An attempt failed in a way that a new attempt may cure."""


class _Failures:
    """Failed attempts of a run, for back-off and giving up."""

    def __init__(self):
        self.count = 0          # since the last attempt that ended well
        self.first = None       # monotonic time of the first without progress
        self.protocol = 0       # protocol errors without progress
        self.tls_closed = 0     # TLS closes in a row


class _TokenBucket:
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


class _Window:
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


class _Attempt:
    """One connection of a transfer to its sink (see module docstring)."""

    def __init__(self, transfer):
        self.t = transfer
        self.cfg = transfer.cfg
        self.cond = threading.Condition(transfer.lock)
        self.error = None
        self.stopped = threading.Event()
        self.control = None
        self.outbox = None
        self.data = []
        self.threads = []
        self.plane = None
        self.pool = None
        # Both queues are bounded by the window; None stops a worker.
        self.read_q = queue.SimpleQueue()
        self.send_q = queue.SimpleQueue()
        self.window = None
        self.open = collections.OrderedDict()
        self.bye = threading.Event()
        self.rdma_bufs = {}
        self.rate = _TokenBucket(self.cfg.rate_limit)
        # Features the sink accepted for this session (ConnectAck.caps).
        self.zero_extents = False
        self.policy = compress.Policy("off", self.cfg.compression_min_saving)
        self.zeros = None           # sourcehash.ZeroSource, when needed

    # Error handling: the first error wins, everything else stops.
    def fail(self, exc):
        with self.cond:
            if self.error is None:
                self.error = exc
            self.cond.notify_all()
        self._stop_workers()
        for conn in [self.control] + self.data:
            if conn is not None:
                conn.shutdown()
        if self.pool is not None:
            self.pool.close()

    def _stop_workers(self):
        if self.stopped.is_set():
            return
        self.stopped.set()
        for _ in range(self.cfg.io_threads):
            self.read_q.put(None)
        for _ in range(self.cfg.streams):
            self.send_q.put(None)

    def wake(self):
        with self.cond:
            self.cond.notify_all()

    def _thread(self, target, name, *args):
        def run():
            try:
                target(*args)
            except Exception as exc:  # noqa: B902 - handed to fail()
                if not self.stopped.is_set():
                    LOG.debug("%s: %s", name, exc, exc_info=True)
                self.fail(exc)
        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    # Lifecycle.
    def run(self):
        try:
            self._connect()
            self._start()
            self._schedule()
        except (errors.Cancelled, _Fatal) as exc:
            self.fail(exc)
            raise
        except Exception as exc:  # noqa: B902 - re-raised below
            self.fail(exc)
            # The first error any thread hit says best what went wrong
            # (a sink's ERROR rather than the broken pipe that followed).
            raise self.error
        finally:
            self._teardown()

    def _connect(self):
        t, cfg = self.t, self.cfg
        dev = t.rdma_device if cfg.transport != "tcp" else None
        caps = P.Caps.RDMA if dev is not None else P.Caps.NONE
        if cfg.zero_extents:
            caps |= P.Caps.ZERO_EXTENTS
        if cfg.compression != "off" and compress.AVAILABLE:
            caps |= P.Caps.ZSTD
        if cfg.transport == "rdma" and dev is None:
            raise _Fatal("transport=rdma but this agent has no usable "
                         "RDMA device")

        def open_conn(role, index, epoch, rdma=b""):
            conn, ack = open_connection(t.peer, P.Connect(
                P.VERSION, P.VERSION, role, index, caps,
                t.manifest.id_bytes, epoch, t.object_size, cfg.streams,
                os.urandom(32), t.local_name, rdma), cfg,
                buffer_bytes=cfg.socket_buffer_bytes)
            conn.settimeout(None)
            return conn, ack

        self.control, ack = open_conn(P.Role.CONTROL, 0, 0)
        if ack.object_size != t.object_size or ack.streams != cfg.streams:
            raise errors.ProtocolError("sink changed session parameters")
        # Data connections carry the session's caps: what both sides use.
        session = P.Caps(ack.caps) & (P.Caps.ZERO_EXTENTS | P.Caps.ZSTD) \
            & caps
        caps = (caps & ~(P.Caps.ZERO_EXTENTS | P.Caps.ZSTD)) | session
        window = min(cfg.window_bytes, ack.max_inflight * t.object_size)
        self.window = _Window(window)
        if ack.data_plane == P.DataPlane.RDMA and dev is not None:
            count = min(cfg.pool_objects,
                        window // t.object_size + cfg.io_threads)
            # Registered for this attempt only, in a protection domain
            # of its own: closing the plane deregisters it.
            self.plane = dev.source_plane(count, t.object_size)
            self.pool = self.plane.pool
        else:
            if cfg.transport == "rdma":
                raise _Fatal("transport=rdma but the sink offers only TCP")
            count = min(cfg.pool_objects, cfg.io_threads + 3 * cfg.streams)
            self.pool = buffers.BufferPool(count, t.object_size)
            self.plane = tcp.TcpSourcePlane()
        for i in range(cfg.streams):
            conn, dack = open_conn(P.Role.DATA, i, ack.epoch,
                                   self.plane.endpoint(i))
            self.data.append(conn)
            self.plane.attach(i, dack.rdma)
        self.zero_extents = bool(session & P.Caps.ZERO_EXTENTS)
        if session & P.Caps.ZSTD and self.plane.kind == P.DataPlane.TCP:
            self.policy = compress.Policy(
                cfg.compression, cfg.compression_min_saving,
                self.send_q.qsize, backlog_high=max(1, cfg.streams // 2))
        LOG.info("transfer %s: connected to %s (%s, %d streams, epoch %d, "
                 "window %d bytes, %d-byte objects, zero extents %s, "
                 "compression %s)", t.transfer_id, t.peer,
                 P.DataPlane(ack.data_plane).name, cfg.streams, ack.epoch,
                 window, t.object_size,
                 "on" if self.zero_extents else "off", self.policy.mode)

    def _start(self):
        cfg = self.cfg
        self.outbox = stream.Outbox(self.control, self.fail, "ctl-out")
        self._thread(self._control_reader, "ctl-in")
        for i in range(cfg.io_threads):
            self._thread(self._reader, "read-%d" % i)
        for i, conn in enumerate(self.data):
            self._thread(self._sender, "send-%d" % i, i, conn)
            if not self.plane.releases_on_send:
                self._thread(self._pulled_reader, "pulled-%d" % i, i, conn)

    def _teardown(self):
        self._stop_workers()
        if self.outbox is not None:
            self.outbox.close(timeout=2.0)
        for conn in [self.control] + self.data:
            if conn is not None:
                conn.close()
        if self.pool is not None:
            self.pool.close()
        for th in self.threads:
            th.join(timeout=10.0)
        if self.plane is not None:
            self.plane.close()
        with self.cond:
            for f in self.t.files:
                if f.state not in TERMINAL:
                    f.state = FileState.PENDING
                f.pending.clear()
                f.outstanding.clear()
                f.light.clear()
                f.declared = False

    def _check(self):
        if self.error is not None:
            raise self.error
        if self.t._cancel.is_set():
            raise errors.Cancelled("transfer cancelled")

    # The scheduler.
    def _schedule(self):
        t, cfg = self.t, self.cfg
        todo = collections.deque(f for f in t.files if f.state not in TERMINAL)
        while True:
            announce = []
            pick = None
            with self.cond:
                try:
                    self._check()
                except errors.Cancelled:
                    self.control.send(P.Abort(errors.Code.ABORTED,
                                              "cancelled by operator"))
                    raise
                while todo and len(self.open) < cfg.max_open_files:
                    f = todo.popleft()
                    if f.state in TERMINAL:
                        continue
                    msg = self._announce(f)
                    if msg is not None:
                        announce.append(msg)
                if not announce:
                    if not todo and not self.open:
                        break
                    pick, wait = self._pick()
                    if pick is None:
                        self.cond.wait(wait)
                        continue
            for msg in announce:
                self.outbox.post(msg)
            if pick is not None:
                for item in self._take(*pick):
                    self.read_q.put(item)
        self.outbox.post(P.Bye(P.ByeFlags.REQUEST))
        self.bye.wait(timeout=30.0)

    def _take(self, f, generation, index, run=0):
        """Hold window for object ``index`` of ``f`` (or, with ``run``,
        for the zero extent of ``run`` objects from ``index``); return
        the read queue items of what still needs sending (nothing held
        for the rest).

        Invariant: the window holds exactly the cost of the objects in
        the ``outstanding`` sets (their length, or ZERO_COST for those
        also in ``light``), one slot per index, and every path that
        takes an index out of a set (BLOCK_SYNC, NACK, RESTART, a failed
        or complete file) gives its slot back.
        """
        cost = ZERO_COST * run if run else f.span(index)[1]
        while not self.window.acquire(cost, timeout=0.2):
            with self.cond:
                self._check()
        with self.cond:
            if f.state != FileState.OPEN or f.generation != generation:
                self.window.release(cost)
                return []
            if not run:
                if index in f.done or index in f.outstanding:
                    self.window.release(cost)
                    return []
                f.outstanding.add(index)
                return [(f, generation, index, 0)]
            items = []
            for i in range(index, index + run):
                if i in f.done or i in f.outstanding:
                    self.window.release(ZERO_COST)
                    continue
                f.outstanding.add(i)
                f.light.add(i)
                if items and items[-1][2] + items[-1][3] == i:
                    items[-1] = items[-1][:3] + (items[-1][3] + 1,)
                else:
                    items.append((f, generation, i, 1))
            return items

    def _announce(self, f):
        """NEW_FILE for ``f`` (called with the lock held)."""
        t = self.t
        if f.fd is None:
            f.fd = t.open_source(f)
            if f.fd is None:
                return None
        flags = P.FileFlags.NONE
        if f.spec.growing:
            flags |= P.FileFlags.GROWING
        if not self.cfg.verify_sha512:
            flags |= P.FileFlags.NO_SHA512
        elif f.sha512 is not None:
            flags |= P.FileFlags.HAS_SHA512
        done = b""
        if f.restart:
            flags |= P.FileFlags.RESTART
        else:
            done = f.done.encode_runs()
            if len(done) > P.MAX_BODY - P.MAX_NAME - 1024:
                # Pathologically fragmented: start the file over.
                t.forget(f)
                done = b""
        f.restart = False
        f.generation += 1
        f.state = FileState.ANNOUNCED
        self.open[f.file_id] = f
        return P.NewFile(f.file_id, flags, f.spec.size, f.spec.mtime_ns,
                         f.spec.mode & 0o777, t.object_size,
                         f.sha512 or NO_SHA512, f.spec.name, done)

    def _pick(self):
        """Next (file, generation, index) to send, or (None, seconds to
        wait).
        """
        wait = 0.5
        for f in self.open.values():
            if f.state != FileState.OPEN or not f.pending:
                continue
            index = f.pending[0]
            offset, length = f.span(index)
            if f.spec.growing and f.available < offset + length:
                try:
                    avail = self.t.available(f)
                except dataset.GrowingFileFailed as exc:
                    self._drop(f, str(exc), errors.Code.SOURCE_CHANGED)
                    continue
                if avail < offset + length:
                    wait = POLL
                    continue
            f.pending.popleft()
            return (f, f.generation, index, self._hole_run(f, index)), 0
        return None, wait

    def _hole_run(self, f, index):
        """How many objects from ``index`` (just taken from
        ``f.pending``) lie in a hole of the file, taking the rest of them
        from ``f.pending`` too; 0 if ``index`` may hold data (lock held).
        Below a growing file's watermark a hole reads as zeros for good.
        """
        if not self.zero_extents or f.fd is None:
            return 0
        offset, length = f.span(index)
        limit = min(f.available, f.spec.size)
        if not length or offset + length > limit:
            return 0
        data = extents.next_data(f.fd, offset, limit)
        if data < offset + length:
            return 0
        run = 1
        while f.pending and run < MAX_ZERO_RUN and \
                f.pending[0] == index + run:
            o, n = f.span(index + run)
            if o + n > data:
                break
            f.pending.popleft()
            run += 1
        return run

    def _drop(self, f, message, code):
        """Fail ``f`` and give back its window (lock held)."""
        self.t.fail_file(f, message, code)
        self._release(f)
        f.pending.clear()
        self.open.pop(f.file_id, None)
        self.cond.notify_all()

    def _release(self, f, indices=None):
        """Give back the window of ``f``'s outstanding objects (or of
        ``indices`` of them) (lock held).
        """
        if indices is None:
            indices, f.outstanding = f.outstanding, set()
        else:
            indices = [i for i in indices if i in f.outstanding]
            f.outstanding.difference_update(indices)
        cost = 0
        for i in indices:
            if i in f.light:
                f.light.discard(i)
                cost += ZERO_COST
            else:
                cost += f.span(i)[1]
        self.window.release(cost)

    def _lighten(self, f, generation, index):
        """Object ``index``, read and found all zero, now holds only
        ZERO_COST of the window.
        """
        with self.cond:
            if f.generation != generation or index not in f.outstanding \
                    or index in f.light or f.span(index)[1] <= ZERO_COST:
                return
            f.light.add(index)
            self.window.release(max(0, f.span(index)[1] - ZERO_COST))

    def declare(self, f):
        """Send f's sha512 if the sink is waiting for it."""
        with self.cond:
            if f.state != FileState.OPEN or f.declared or \
                    f.sha512 is None or not self.cfg.verify_sha512:
                return
            f.declared = True
        self.outbox.post(P.FileClose(f.file_id, P.CloseStatus.DECLARE, 0,
                                     f.spec.size, f.sha512))

    # Worker threads.
    def _reader(self):
        """Read objects into pool buffers (the buffer is taken before the
        object, so that an object that the in-order sha512 waits for is
        always being read) and queue what to send.
        """
        policy = self.policy
        comp = compress.Compressor(self.cfg.compression_level) \
            if policy.enabled else None
        buf = None
        while True:
            if buf is None and self.pool is not None:
                buf = self.pool.acquire()
                if buf is None:
                    return
            item = self.read_q.get()
            if item is None or self.stopped.is_set():
                break
            f, generation, index = item[:3]
            run = item[3] if len(item) > 3 else 0
            if f.state != FileState.OPEN or f.generation != generation:
                continue
            if run:
                self._send_zeros(f, generation, index, run)
                continue
            offset, length = f.span(index)
            mac = auth.object_mac(self.control.object_key, f.file_id, index,
                                  offset, length)
            try:
                digest = self._read(f.fd, offset, length, buf, None, mac)
            except OSError as exc:
                with self.cond:
                    self._drop(f, "read error on %s: %s" % (f.spec.path, exc),
                               errors.Code.IO)
                continue
            if digest is None:
                with self.cond:
                    self._drop(f, "%s shrank while being sent" % f.spec.path,
                               errors.Code.SOURCE_CHANGED)
                continue
            view = buf.view[:length]
            if self.zero_extents and extents.is_zero(view, digest):
                self._lighten(f, generation, index)
                self._send_zeros(f, generation, index, 1)
                continue
            self._hash(f, generation, offset, view)
            if policy.enabled and policy.want():
                wire = comp.compress(view)
                if policy.worth(length, len(wire)):
                    self.t.wire.add(objects_compressed=1)
                    msg = P.NewBlockZ(f.file_id, index, offset, length,
                                      digest, P.Encoding.ZSTD, len(wire),
                                      mac=auth.object_tag(mac))
                    self.send_q.put((f, generation, msg, wire))
                    continue
            msg = P.NewBlock(f.file_id, index, offset, length, digest,
                             mac=auth.object_tag(mac))
            self.send_q.put((f, generation, msg, buf))
            buf = None
        if buf is not None:
            self.pool.release(buf)

    def _send_zeros(self, f, generation, index, count):
        """Queue ZERO_BLOCKS for ``count`` objects from ``index`` (and
        feed their zeros to the file's sha512).
        """
        if f.hasher is not None:
            if self.zeros is None:
                self.zeros = sourcehash.ZeroSource(self.t.object_size)
            for i in range(index, index + count):
                offset, length = f.span(i)
                if not self._hash(f, generation, offset,
                                  self.zeros.view[:length]):
                    break
        self.t.wire.add(objects_zero=count)
        self.send_q.put((f, generation, P.ZeroBlocks(f.file_id, index, count),
                         None))

    def _hash(self, f, generation, offset, view):
        """Feed ``view``, the bytes at ``offset`` of ``f``, to ``f``'s
        sha512 in file order; False if the wait was given up.
        """
        h = f.hasher
        if h is None:
            return True

        def give_up():
            return self.stopped.is_set() or f.hasher is not h or \
                f.state != FileState.OPEN or f.generation != generation

        if not h.feed(offset, view, self._fill_gap(f), give_up):
            return False
        # Objects after this one that nobody sends in this attempt.
        with h.cond:
            while not h.complete and self._fill_gap(f)(h.offset, h):
                pass
        self.t.hash_done(f)
        return True

    def _fill_gap(self, f):
        def fill(offset, h):
            """Feed the object at the hash's ``offset`` if nobody else
            will (the sink holds it from an earlier run); True if fed.
            Called with ``h.cond`` held.
            """
            index = offset // self.t.object_size
            with self.cond:
                if index >= f.nobjects or index not in f.done or \
                        index in f.outstanding or f.fd is None:
                    return False
                fd = f.fd
            start, length = f.span(index)
            end = start + length
            scratch = buffers.aligned(min(end - offset, checksum.PIECE * 4))
            while offset < end:
                n = os.preadv(fd, [scratch[:min(len(scratch),
                                                end - offset)]], offset)
                if n <= 0:
                    raise OSError("%s is shorter than its declared size"
                                  % f.spec.path)
                h.update_at(offset, scratch[:n])
                self.t.wire.add(bytes_hashed_again=n)
                offset += n
            return True
        return fill

    def _hash_rest(self, f):
        """Finish ``f``'s sha512 when no object of it is left to send."""
        h = f.hasher
        if h is None:
            return
        with h.cond:
            while not h.complete and not self.stopped.is_set() and \
                    self._fill_gap(f)(h.offset, h):
                pass
        self.t.hash_done(f)

    @staticmethod
    def _read(fd, offset, length, buf, scratch, mac=None):
        """xxh3 of ``length`` bytes at ``offset`` (read into ``buf`` if
        given, and fed to ``mac`` in the same pass), or None if the file
        is shorter.
        """
        h = checksum.xxh3_stream()
        pos = 0
        while pos < length:
            n = min(checksum.PIECE, length - pos)
            view = scratch[:n] if buf is None else buf.view[pos:pos + n]
            if os.preadv(fd, [view], offset + pos) != n:
                return None
            h.update(view)
            if mac is not None:
                mac.update(view)
            pos += n
        return h.intdigest()

    def _sender(self, stream_index, conn):
        t = self.t
        while True:
            item = self.send_q.get()
            if item is None or self.stopped.is_set():
                return
            f, generation, msg, buf = item
            block = type(msg) is P.NewBlock
            if f.state != FileState.OPEN or f.generation != generation:
                if block and buf is not None:
                    self.pool.release(buf)
                continue
            if type(msg) is P.ZeroBlocks:
                for i in range(msg.index, msg.index + msg.count):
                    f.sent.add(i)
                conn.send(msg)
                continue
            if not f.sent.add(msg.index):
                t.progress.add(bytes_resent=msg.length, objects_resent=1)
            self.rate.take(len(buf) if not block else msg.length,
                           self.stopped)
            before = conn.bytes_sent
            if not block:
                conn.send(msg, payload=buf)     # NEW_BLOCK_Z: zstd bytes
            else:
                if not self.plane.releases_on_send:
                    # The sink answers a stream's NEW_BLOCKs in order, so
                    # the stream's BLOCK_PULLED frees the oldest buffer it
                    # exposes (one object may be exposed twice: a NACK's
                    # resend can go out before the first copy's
                    # BLOCK_PULLED arrives).
                    with self.cond:
                        self.rdma_bufs.setdefault(
                            stream_index, collections.deque()).append(
                                ((msg.file_id, msg.index), buf))
                self.plane.send(conn, stream_index, msg, buf, f.fd)
                if self.plane.releases_on_send and buf is not None:
                    self.pool.release(buf)
            t.wire.add(bytes_sent_wire=conn.bytes_sent - before)
            t.progress.add(bytes_sent=msg.length)

    def _pulled_reader(self, stream_index, conn):
        while not self.stopped.is_set():
            try:
                msg = conn.recv(expect=(P.MsgType.BLOCK_PULLED,))
            except ConnectionError:
                with self.cond:
                    if self.rdma_bufs.get(stream_index):
                        raise
                # Nothing exposed on this stream: the sink closing it (as
                # it does at the end of a session) loses nothing; the
                # control connection tells how the attempt ends.
                return
            with self.cond:
                exposed = self.rdma_bufs.get(stream_index)
                key, buf = exposed.popleft() if exposed else (None, None)
            if key != (msg.file_id, msg.index):
                raise errors.ProtocolError(
                    "BLOCK_PULLED for object %d of file %d on data stream "
                    "%d, which exposes %s" % (
                        msg.index, msg.file_id, stream_index,
                        "object %d of file %d" % key[::-1] if key
                        else "no buffer"))
            self.pool.release(buf)

    def _control_reader(self):
        conn = self.control
        handlers = {
            P.MsgType.FILE_ID: self._on_file_id,
            P.MsgType.BLOCK_SYNC: self._on_block_sync,
            P.MsgType.BLOCK_NACK: self._on_nack,
            P.MsgType.FILE_CLOSE: self._on_file_close,
            P.MsgType.ERROR: self._on_error,
            P.MsgType.BYE: self._on_bye,
        }
        while not self.stopped.is_set():
            msg = conn.recv(expect=tuple(handlers))
            handlers[msg.TYPE](msg)

    def _file(self, file_id):
        f = self.open.get(file_id)
        if f is None and not (0 <= file_id < len(self.t.files)):
            raise errors.ProtocolError("sink named unknown file %d" % file_id)
        return f

    def _on_file_id(self, msg):
        t = self.t
        with self.cond:
            f = self._file(msg.file_id)
            if f is None or f.state != FileState.ANNOUNCED:
                return
            status = P.FileStatus(msg.status)
            if status == P.FileStatus.SKIP:
                self._complete(f, "already at the sink")
                return
            if status == P.FileStatus.REFUSED:
                self._drop(f, "sink refused %s: %s" % (f.spec.name,
                                                       msg.message),
                           errors.Code(msg.code or errors.Code.INTERNAL))
                return
            if status == P.FileStatus.RESET and len(f.done):
                LOG.info("transfer %s: sink has no partial copy of %s; "
                         "sending it whole", t.transfer_id, f.spec.name)
                t.forget(f)
            f.pending = collections.deque(f.done.missing())
            f.state = FileState.OPEN
            self.cond.notify_all()
            rest = f.hasher is not None and not f.pending
        if rest:
            # Nothing of it to send: its hash reads what it lacks.
            self._thread(self._hash_rest, "hash-%d" % f.file_id, f)
        self.declare(f)

    def _on_block_sync(self, msg):
        t = self.t
        logged = []
        nbytes = 0
        with self.cond:
            for file_id, first, count in msg.iter_ranges():
                f = self._file(file_id)
                if f is None or count > f.nobjects or first > f.nobjects:
                    continue
                for index in range(first, min(first + count, f.nobjects)):
                    # Only objects sent in this attempt can be confirmed.
                    if index in f.outstanding and f.done.add(index):
                        logged.append((file_id, index))
                        nbytes += f.span(index)[1]
            if logged:
                with t.timed_log():
                    t.log.record(logged)
            # Logged first, then the window moves: a crash in between
            # resends nothing the log holds.
            for file_id, index in logged:
                self._release(self.t.files[file_id], (index,))
        t.progress.add(bytes_done=nbytes, objects_done=len(logged))

    def _on_nack(self, msg):
        t = self.t
        with self.cond:
            f = self._file(msg.file_id)
            if f is None or f.state != FileState.OPEN or \
                    msg.index >= f.nobjects or msg.index in f.done:
                return
            if msg.index not in f.outstanding:
                # Not sent in this announcement of the file (or already
                # given back): nothing to resend or release.
                return
            # The damaged copy is gone: its window slot goes back before
            # the object is queued again, or every NACK would leak one.
            self._release(f, (msg.index,))
            f.nacks[msg.index] += 1
            t.progress.add(objects_corrupt=1)
            if f.nacks[msg.index] > self.cfg.max_object_retries:
                self._drop(f, "object %d of %s failed its checksum %d times"
                           % (msg.index, f.spec.name, f.nacks[msg.index]),
                           errors.Code.CHECKSUM)
                return
            LOG.warning("transfer %s: sink reports object %d of %s damaged "
                        "(%s); resending", t.transfer_id, msg.index,
                        f.spec.name, errors.Code(msg.code).name)
            f.pending.appendleft(msg.index)
            self.cond.notify_all()

    def _on_file_close(self, msg):
        t = self.t
        with self.cond:
            f = self._file(msg.file_id)
            if f is None or f.state not in (FileState.OPEN,
                                            FileState.ANNOUNCED):
                return
            status = P.CloseStatus(msg.status)
            changed = self._changed_under(f)
            if changed:
                # The sink's copy may mix old and new content: the next
                # run finds the change and sends the file from its start.
                self._drop(f, "%s changed while it was being sent (%s); a "
                           "new run sends it again from its start"
                           % (f.spec.path, ", ".join(changed)),
                           errors.Code.SOURCE_CHANGED)
                return
            if status == P.CloseStatus.OK:
                self._complete(f, "verified")
                return
            if status == P.CloseStatus.MISMATCH and f.changed and \
                    f.spec.sha512:
                # Sending it again cannot help: it is not the content
                # that the given sha512 describes any more.
                self._drop(f, "%s changed since the transfer was defined "
                           "and no longer matches the sha512 given for it"
                           % f.spec.path, errors.Code.SOURCE_CHANGED)
                return
            if status == P.CloseStatus.MISMATCH and \
                    f.file_retries < self.cfg.max_file_retries:
                f.file_retries += 1
                LOG.warning("transfer %s: %s: %s; sending it again "
                            "(%d/%d)", t.transfer_id, f.spec.name,
                            msg.message, f.file_retries,
                            self.cfg.max_file_retries)
                self._release(f)
                f.pending.clear()
                t.forget(f)
                f.restart = True
                announce = self._announce(f)
            else:
                self._drop(f, msg.message or "sink failed the file",
                           errors.Code(msg.code or errors.Code.IO))
                return
        self.outbox.post(announce)

    @staticmethod
    def _changed_under(f):
        """What changed in ``f``'s open file since it was checked."""
        if f.fd is None:
            return []
        return dataset.changes(f.spec, os.fstat(f.fd))

    def _complete(self, f, how):
        """Mark ``f`` complete (lock held)."""
        t = self.t
        with t.timed_log():
            t.log.complete(f.file_id)
        t.progress.add(bytes_done=f.spec.size - f.done_bytes(),
                       objects_done=f.nobjects - len(f.done),
                       files_done=1)
        f.done = bitmap.Bitmap(f.nobjects, b"\xff" * len(f.done.bits))
        f.state = FileState.COMPLETE
        self._release(f)
        self.open.pop(f.file_id, None)
        t._close_fd(f)
        LOG.debug("transfer %s: %s complete (%s)", t.transfer_id,
                  f.spec.name, how)
        self.cond.notify_all()

    def _on_error(self, msg):
        if msg.fatal or msg.file_id == P.NO_FILE:
            raise errors.PeerError("sink %s: %s" % (self.t.peer.name,
                                                    msg.message),
                                   msg.code, fatal=bool(msg.fatal))
        with self.cond:
            f = self._file(msg.file_id)
            if f is not None:
                self._drop(f, "sink: %s" % msg.message,
                           errors.Code(msg.code or errors.Code.INTERNAL))

    def _on_bye(self, msg):
        self.bye.set()
        self._stop_workers()
