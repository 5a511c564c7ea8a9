"""Sink data streams: objects received, checked and written.

NEW_BLOCK bytes are received straight into a pooled buffer (hashed on
the way: xxh3 and the object's keyed digest), written at their offset by
the shared I/O threads and offered to the file's prefix hasher with the
same buffer (see ``sink.hash``).  NEW_BLOCK_Z bytes are received into a
per-thread scratch buffer and decoded into the pooled buffer with an
output bound of the object's length: a decoder error, a wrong size or a
failed check is damage, answered with BLOCK_NACK like a damaged
NEW_BLOCK.  ZERO_BLOCKS leave the region a hole: nothing to do in a copy
created afresh (it was sized by ftruncate), a punched hole where the
region may hold older bytes (zeros written where punching is not
supported); the objects then count as written.
"""

import ctypes
import ctypes.util
import errno
import logging
import os
import threading

from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import direct
from dtn_migrate.transfer import errors
from dtn_migrate.transfer.sink import hash as sinkhash
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol as P

try:
    import zstandard
except ImportError:         # pragma: no cover - a declared dependency
    zstandard = None

LOG = logging.getLogger(__name__)

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
# A file with all its objects written is synced within this delay rather
# than at once: files that complete together (small files) share one
# fdatasync batch and one BLOCK_SYNC, i.e. one object-log write.
COMPLETE_SYNC_DELAY = 0.01
_local = threading.local()
_libc = None


def _load_libc():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                           use_errno=True)
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int64, ctypes.c_int64]
        libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_size_t]
        libc.memcmp.restype = ctypes.c_int
        _libc = libc
    return _libc


def _fallocate():
    return _load_libc().fallocate


def punch_hole(fd, offset, length):
    """Make ``length`` bytes at ``offset`` read as zeros, freeing their
    blocks where the file system can (a hole), else writing zeros.
    Returns True if a hole was punched.
    """
    if length <= 0:
        return True
    if _fallocate()(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    offset, length) == 0:
        return True
    err = ctypes.get_errno()
    if err not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        raise OSError(err, os.strerror(err))
    zero = sinkhash.zeros()
    end = offset + length
    while offset < end:
        offset += os.pwrite(fd, zero[:min(len(zero), end - offset)], offset)
    return False


PAGE = 4096
_zero_page = None


def _memcmp():
    global _zero_page
    if _zero_page is None:
        _zero_page = ctypes.create_string_buffer(PAGE)
    return _load_libc().memcmp, ctypes.addressof(_zero_page)


def data_runs(view, length):
    """(start, end) runs of ``view[:length]`` that are not all zero, in
    whole 4 KiB pages (the last one may be short).
    """
    memcmp, zero = _memcmp()
    base = ctypes.addressof(ctypes.c_char.from_buffer(view))
    runs = []
    start = None
    for pos in range(0, length, PAGE):
        n = min(PAGE, length - pos)
        if memcmp(base + pos, zero, n):
            if start is None:
                start = pos
        elif start is not None:
            runs.append((start, pos))
            start = None
    if start is not None:
        runs.append((start, length))
    return runs


def write_sparse(fd, view, length, offset):
    """Write ``view[:length]`` at ``offset`` of a region that reads as
    zeros already (a hole): only its pages that are not all zero, so
    the hole stays one.  Returns the bytes written.
    """
    written = 0
    for start, end in data_runs(view, length):
        done = start
        while done < end:
            done += os.pwrite(fd, view[done:end], offset + done)
        written += end - start
    return written


def zstd_available():
    return zstandard is not None


def decode_into(wire, out, length):
    """Decode zstd ``wire`` into ``out[:length]``, never producing more
    than ``length`` bytes.  True if it decodes to exactly ``length``.
    """
    if zstandard is None:
        return False
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    try:
        reader = dctx.stream_reader(wire, read_across_frames=False)
        got = 0
        while got < length:
            n = reader.readinto(out[got:length])
            if not n:
                return False
            got += n
        # One byte more would be past the bound: the object is damaged.
        return not reader.readinto(bytearray(1))
    except zstandard.ZstdError:
        return False


def _wire_scratch(size):
    buf = getattr(_local, "wire", None)
    if buf is None or len(buf) < size:
        buf = _local.wire = buffers.aligned(size)
    return buf


class ReceiveMixin:
    """SinkSession's data streams."""

    def run_data(self, conn, index):
        with self.lock:
            if self.closed:
                return
            if index in self.data:
                raise errors.ProtocolError("data stream %d opened twice"
                                           % index)
            self.data[index] = conn
        try:
            self._receive(conn, index)
        except errors.ProtocolError as exc:
            LOG.warning("sink: transfer %s, data stream %d from %s: %s; "
                        "closing that connection", self.transfer_id, index,
                        conn.peer, exc)
            self.record.last_error = str(exc)
            self.outbox.post(P.Error(exc.code, 0, P.NO_FILE,
                                     ("data stream %d: %s" % (index, exc))
                                     [:1000]))
        except (ConnectionError, OSError):
            pass
        finally:
            with self.lock:
                if self.data.get(index) is conn:
                    del self.data[index]
                self.cond.notify_all()
            self.plane.release_stream(index)

    def _data_types(self):
        types = [P.MsgType.NEW_BLOCK]
        if self.caps & P.Caps.ZERO_EXTENTS:
            types.append(P.MsgType.ZERO_BLOCKS)
        if self.caps & P.Caps.ZSTD:
            types.append(P.MsgType.NEW_BLOCK_Z)
        return tuple(types), "data streams of this session carry only %s, " \
            "got %%s" % "/".join(t.name for t in types)

    def _target(self, msg):
        """The open file an object message is for, or None if it is for
        a file that just finished or failed.
        """
        f = self.files.get(msg.file_id)
        if f is None or f.state != "open":
            if f is None and msg.file_id not in self.retired:
                raise errors.ProtocolError(
                    "object for file %d, which was never announced"
                    % msg.file_id)
            return None
        return f

    def _acquire(self):
        buf = None
        while buf is None:
            if self.closed:
                return None
            buf = self.pool.acquire(timeout=0.5)
        return buf

    def _receive(self, conn, index):
        expect, refuse = self._data_types()
        while not self.closed:
            msg = conn.recv(expect=expect, refuse=refuse)
            if isinstance(msg, P.ZeroBlocks):
                self._zero_blocks(msg)
                continue
            if msg.length > self.object_size:
                raise errors.BoundsError(
                    "object of %d bytes exceeds the session's object size "
                    "%d" % (msg.length, self.object_size))
            compressed = isinstance(msg, P.NewBlockZ)
            f = self._target(msg)
            if f is None:
                # A file that just finished or failed: discard the bytes.
                if compressed:
                    conn.recv_into(_wire_scratch(msg.wire_length),
                                   msg.wire_length)
                else:
                    self.plane.discard(conn, index, msg)
                    if self.plane.acks_pull:
                        conn.send(P.BlockPulled(msg.file_id, msg.index))
                continue
            if msg.index >= f.nobjects:
                raise errors.BoundsError(
                    "object index %d beyond the %d objects of %s"
                    % (msg.index, f.nobjects, f.name))
            offset, length = f.span(msg.index)
            if msg.offset != offset or msg.length != length:
                raise errors.BoundsError(
                    "object %d of %s claims offset %d length %d; expected "
                    "offset %d length %d" % (msg.index, f.name, msg.offset,
                                             msg.length, offset, length))
            wire = None
            if compressed:
                # The encoded bytes leave the stream before anything else
                # can fail: the next frame starts after them.
                wire = _wire_scratch(msg.wire_length)[:msg.wire_length]
                conn.recv_into(wire, msg.wire_length)
            buf = self._acquire()
            if buf is None:
                return
            mac = self._object_mac(msg, offset, length)
            try:
                if compressed:
                    damage = self._decode_object(msg, wire, buf, mac)
                else:
                    damage = self._receive_object(conn, index, msg, buf,
                                                  mac)
            except BaseException:
                self.pool.release(buf)
                raise
            if damage is not None:
                self.pool.release(buf)
                self.record.add(objects_corrupt=1)
                LOG.warning("sink: transfer %s: object %d of %s failed its "
                            "%s; asking for it again", self.transfer_id,
                            msg.index, f.name, damage[1])
                self.outbox.post(P.BlockNack(msg.file_id, msg.index,
                                             damage[0]))
                continue
            if not self._submit(f, self._write, f, msg.index, offset, buf,
                                length, compressed):
                self.pool.release(buf)
                return

    def _submit(self, f, func, *args):
        with self.lock:
            f.inflight += 1
            self.tasks += 1
        try:
            self.server.io.submit(func, *args)
            return True
        except RuntimeError:     # executor shut down: agent stopping
            self._task_done(f)
            return False

    def _object_mac(self, msg, offset, length):
        """The keyed digest to check the object with (None without frame
        authentication); with the send's one-time ``nonce`` where the
        protocol carries one.
        """
        args = (self.object_key, msg.file_id, msg.index, offset, length)
        nonce = getattr(msg, "nonce", None)
        if nonce is not None:
            return auth.object_mac(*args, nonce)
        return auth.object_mac(*args)

    def _receive_object(self, conn, index, msg, buf, mac):
        """Receive one object into ``buf``, checking its xxh3 and, with
        frame authentication, its keyed digest (in the same pass over
        TCP).  None, or (code, what failed).
        """
        length = msg.length
        if mac is not None and getattr(self.plane, "hashes_mac", False):
            digest = self.plane.receive(conn, index, msg, buf, mac)
        else:
            digest = self.plane.receive(conn, index, msg, buf)
            if mac is not None:
                mac.update(buf.view[:length])
        if self.plane.acks_pull:
            conn.send(P.BlockPulled(msg.file_id, msg.index))
        self.record.add(bytes_received=length, objects_received=1)
        if digest is None:
            digest = checksum.xxh3(buf.view[:length])
        return self._check(msg, digest, mac)

    def _decode_object(self, msg, wire, buf, mac):
        """Decode a NEW_BLOCK_Z's bytes into ``buf`` and check them."""
        length = msg.length
        self.record.add(bytes_received=length, objects_received=1)
        if msg.encoding != P.Encoding.ZSTD or \
                not decode_into(wire, buf.view, length):
            return errors.Code.CHECKSUM, "decoding"
        view = buf.view[:length]
        if mac is not None:
            mac.update(view)
        return self._check(msg, checksum.xxh3(view), mac)

    @staticmethod
    def _check(msg, digest, mac):
        if digest != msg.xxh3:
            return errors.Code.CHECKSUM, "checksum"
        if mac is not None and not auth.verify(auth.object_tag(mac),
                                               msg.mac):
            return errors.Code.INTEGRITY, "authentication tag"
        return None

    def _zero_blocks(self, msg):
        f = self._target(msg)
        if f is None:
            return
        if msg.index + msg.count > f.nobjects:
            raise errors.BoundsError(
                "zero extent %d+%d beyond the %d objects of %s"
                % (msg.index, msg.count, f.nobjects, f.name))
        self._submit(f, self._zero, f, msg.index, msg.count)

    def _task_done(self, f=None):
        with self.lock:
            self.tasks -= 1
            if f is not None:
                f.inflight -= 1
            self.cond.notify_all()

    def _zero(self, f, index, count):
        """I/O thread: objects ``index`` .. ``+count`` read as zeros."""
        error = None
        start, _ = f.span(index)
        end = min(f.size, (index + count) * f.object_size)
        try:
            with self.lock:
                # Older bytes there: a resumed copy, or objects written in
                # this session (the source's file changed meanwhile).
                punch = not f.fresh or (len(f.touched) and any(
                    i in f.touched for i in range(index, index + count)))
                fd = os.dup(f.fd) if f.fd is not None else None
            if fd is not None and punch:
                try:
                    punch_hole(fd, start, end - start)
                finally:
                    os.close(fd)
            elif fd is not None:
                os.close(fd)
        except OSError as exc:
            error = exc
        try:
            if self._written(f, range(index, index + count), 0, error):
                self.record.note_written(f.name, f.nobjects, index, 0, count)
                self._offer_zeros(f, index, count)
        finally:
            self._task_done(f)

    def _write(self, f, index, offset, buf, length, sparse=False):
        """Write an object; with ``sparse`` (a decoded object, which may
        hold zero runs) into a region that is still a hole, only its
        pages that are not all zero.
        """
        error = None
        try:
            view = buf.view
            if sparse:
                with self.lock:
                    sparse = f.fresh and index not in f.touched
            if sparse:
                write_sparse(f.fd, view, length, offset)
                return self._written_object(f, index, length, buf, None)
            if not direct.pwrite(f.fd, view, length, offset,
                                 f.direct_fd()):
                f.direct_refused = True
        except OSError as exc:
            error = exc
        self._written_object(f, index, length, buf, error)

    def _written_object(self, f, index, length, buf, error):
        try:
            if self._written(f, (index,), length, error):
                self.record.note_written(f.name, f.nobjects, index, length)
                self._offer(f, index, buf)
            else:
                self.pool.release(buf)
        finally:
            self._task_done(f)

    def _written(self, f, indices, nbytes, error):
        """Join written objects to the next sync batch; True if ``f`` is
        still the session's open file.
        """
        with self.lock:
            current = f.state == "open" and self.files.get(f.file_id) is f
            if current and error is None:
                if nbytes:
                    f.touched.add(indices[0])
                pending = self.pending.setdefault(f, [])
                pending.extend(indices)
                self.pending_bytes += nbytes
                # Sync soon when a file has all its objects: nothing
                # more is coming for it, and its verification waits.
                if self.pending_bytes >= self.cfg.sync_bytes:
                    self._sync_within(0)
                elif len(f.durable) + len(pending) >= f.nobjects:
                    self._sync_within(COMPLETE_SYNC_DELAY)
        if error is not None and current:
            self._fail(f, error)
            return False
        return current
