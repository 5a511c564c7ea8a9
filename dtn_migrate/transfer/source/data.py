"""The data path of a source attempt: readers and senders.

Readers read each object once into a pool buffer, computing its xxh3
and keyed digest on the way, recognise zero extents (``extents``), feed
the file's sha512 in file order (``source.hash``) and compress the object
when the policy says so (``compress``); senders put NEW_BLOCK (bytes
from that same buffer), NEW_BLOCK_Z or ZERO_BLOCKS on their stream.
"""

import collections
import os

from dtn_migrate.transfer import buffers
from dtn_migrate.transfer import checksum
from dtn_migrate.transfer import compress
from dtn_migrate.transfer import direct
from dtn_migrate.transfer import errors
from dtn_migrate.transfer import extents
from dtn_migrate.transfer.source.file import FileState
from dtn_migrate.transfer.source import hash as sourcehash
from dtn_migrate.transfer.wire import auth
from dtn_migrate.transfer.wire import protocol as P


class DataMixin:
    """Reader and sender threads of ``sourceattempt.Attempt``."""

    def _reader(self):
        """Read objects into pool buffers (the buffer is taken before the
        object, so that an object that the in-order sha512 waits for is
        always being read) and queue what to send.
        """
        policy = self.policy
        comp = compress.Compressor(self.cfg.compression_level) \
            if policy.enabled else None
        # Objects with holes or zero runs inside go zstd-encoded (level
        # 1) even without compression: the runs cost next to nothing.
        sparse = compress.Compressor(1) if self.sparse_objects else None
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
            # A nonce never used before in the session, per send.
            nonce = next(self.nonces)
            mac = auth.object_mac(self.control.object_key, f.file_id, index,
                                  offset, length, nonce)
            try:
                digest = self._read_object(f, offset, length, buf, mac)
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
            wire = None
            if sparse is not None and extents.has_zero_runs(
                    f.fd, offset, length, view, holes=self._holes(f)):
                wire = sparse.compress(view)
                if len(wire) <= length * (1 - policy.min_saving):
                    self.t.wire.add(objects_sparse=1)
                else:
                    wire = None
            elif policy.enabled and policy.want():
                wire = comp.compress(view)
                if policy.worth(length, len(wire)):
                    self.t.wire.add(objects_compressed=1)
                else:
                    wire = None
            if wire is not None:
                msg = P.NewBlockZ(f.file_id, index, offset, length,
                                  digest, P.Encoding.ZSTD, len(wire),
                                  nonce=nonce, mac=auth.object_tag(mac))
                self.send_q.put((f, generation, msg, wire))
                continue
            msg = P.NewBlock(f.file_id, index, offset, length, digest,
                             nonce=nonce, mac=auth.object_tag(mac))
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
    def _holes(f):
        """The hole cursor of ``f``'s open descriptor."""
        cursor = f.holes
        if cursor is None or cursor.fd != f.fd:
            cursor = f.holes = extents.HoleCursor(f.fd)
        return cursor

    def _read_object(self, f, offset, length, buf, mac):
        """xxh3 of an object read into ``buf`` (with O_DIRECT where it
        can: one read, then hashed from memory), or None if the file is
        shorter.
        """
        dfd = f.direct_fd()
        if dfd is None:
            return self._read(f.fd, offset, length, buf, None, mac)
        n, usable = direct.preadinto(f.fd, buf.view, length, offset, dfd)
        if not usable:
            f.direct_refused = True
        if n != length:
            return None
        h = checksum.xxh3_stream()
        for pos in range(0, length, checksum.PIECE):
            view = buf.view[pos:min(length, pos + checksum.PIECE)]
            h.update(view)
            if mac is not None:
                mac.update(view)
        return h.intdigest()

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
            with self._idle_lock:
                self.idle_senders += 1
            item = self.send_q.get()
            with self._idle_lock:
                self.idle_senders -= 1
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
            # Counted once sent whole, as bytes_sent is: a send cut off
            # by a failed attempt makes the next one no resend.
            if f.sent.add(msg.index):
                t.progress.add(bytes_sent=msg.length)
            else:
                t.progress.add(bytes_sent=msg.length, bytes_resent=msg.length,
                               objects_resent=1)

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
