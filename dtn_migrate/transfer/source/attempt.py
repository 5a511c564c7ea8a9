"""One attempt of a source transfer: its connections, the scheduler,
and the control messages from the sink (see ``source.transfer``).
"""

import collections
import itertools
import logging
import os
import queue
import threading

from dtn_migrate.transfer import bitmap
from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import compress
from dtn_migrate.transfer import dataset
from dtn_migrate.transfer import direct
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import extents
from dtn_migrate.transfer.source import data as sourcedata
from dtn_migrate.transfer.source.file import _Fatal
from dtn_migrate.transfer.source.file import FileState
from dtn_migrate.transfer.source.file import open_connection
from dtn_migrate.transfer.source.file import TERMINAL
from dtn_migrate.transfer.source import flow as sourceflow
from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.transport import tcp
from dtn_migrate.transfer.wire import protocol as P

LOG = logging.getLogger(__name__)

NO_SHA512 = bytes(64)
POLL = 0.05
# Window held by an object sent as a zero extent: what it costs to resend
# is a few bytes of ZERO_BLOCKS, not its length.
ZERO_COST = 4096
# Objects in one ZERO_BLOCKS.
MAX_ZERO_RUN = 4096


class Attempt(sourcedata.DataMixin):
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
        self.rate = sourceflow.TokenBucket(self.cfg.rate_limit)
        # Features the sink accepted for this session (ConnectAck.caps).
        self.zero_extents = False
        self.policy = compress.Policy("off", self.cfg.compression_min_saving)
        self.zeros = None           # sourcehash.ZeroSource, when needed
        self.sparse_objects = False     # zero runs inside objects as zstd
        self.idle_senders = 0
        # NEW_BLOCK nonces (auth.object_mac); next() on it is atomic.
        self.nonces = itertools.count(1)
        self._idle_lock = threading.Lock()

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
        if (cfg.compression != "off" or cfg.zero_extents) and \
                compress.AVAILABLE:
            # With zero extents, objects holding zero runs go zstd-encoded.
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
        self.window = sourceflow.Window(window)
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
            # "auto": compress while every sender is busy (the link is
            # the limit), not while one waits for the readers.
            self.policy = compress.Policy(
                cfg.compression, cfg.compression_min_saving,
                self.busy_senders, backlog_high=cfg.streams)
            self.sparse_objects = self.zero_extents
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

    def busy_senders(self):
        """Senders sending (or waiting for the rate limit), not waiting
        for something to send.
        """
        return self.cfg.streams - self.idle_senders

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
            if self.cfg.direct_io:
                f.dfd = direct.reopen(f.fd)
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
                if status == P.CloseStatus.MISMATCH:
                    # The sink discarded its copy: nothing of it may be
                    # claimed done when a later run sends the file again.
                    t.forget(f)
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
