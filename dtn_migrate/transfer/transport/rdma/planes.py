"""The RDMA data planes: the source exposes buffers, the sink READs them.

Each plane keeps one queue pair per data stream (``_Streams``).
"""

import threading

from dtn_migrate.transfer import errors
from dtn_migrate.transfer.transport import base
from dtn_migrate.transfer.transport.rdma import endpoint as endpoint_mod
from dtn_migrate.transfer.transport.rdma import resources
from dtn_migrate.transfer.wire import protocol


class _Streams:
    """Per data stream queue pairs of one plane."""

    def __init__(self, dev, region, access, pd):
        self.dev = dev
        self.region = region
        self._access = access
        self._pd = pd
        self._qps = {}
        self._lock = threading.Lock()
        self._closed = False

    def create(self, stream):
        if not 0 <= stream < protocol.MAX_STREAMS:
            raise ValueError("data stream index %r out of range" % (stream,))
        qp = self.dev._queue_pair(stream, self._access, self._pd)
        with self._lock:
            old = self._qps.pop(stream, None)
            if self._closed:
                old, qp = qp, None
            else:
                self._qps[stream] = qp
        if old is not None:
            old.close()
        if qp is None:
            raise resources.RdmaError("data plane is closed")
        return qp

    def get(self, stream):
        with self._lock:
            return self._qps.get(stream)

    def drop(self, stream, qp=None):
        with self._lock:
            if qp is None or self._qps.get(stream) is qp:
                qp = self._qps.pop(stream, None)
            else:
                qp = None
        if qp is not None:
            qp.close()

    def close(self):
        with self._lock:
            self._closed = True
            qps, self._qps = list(self._qps.values()), {}
        for qp in qps:
            qp.close()


class RdmaSourcePlane(base.SourcePlane):
    """Source: expose each object's buffer; the sink READs it."""

    kind = protocol.DataPlane.RDMA
    releases_on_send = False

    def __init__(self, dev, pool, pd):
        self.dev = dev
        self.pool = pool
        self.region = pool.region
        self.pd = pd
        self._closed = False
        self._streams = _Streams(dev, self.region,
                                 dev._v.e.IBV_ACCESS_REMOTE_READ, pd)

    def endpoint(self, stream):
        return self._streams.create(stream).endpoint().encode()

    def attach(self, stream, remote):
        peer = endpoint_mod.Endpoint.decode(remote)
        qp = self._streams.get(stream)
        if qp is None:
            raise ValueError("attach before endpoint for data stream %d"
                             % stream)
        qp.connect(peer)

    def send(self, conn, stream, msg, buf, fd):
        if msg.length > self.region.size:
            raise ValueError("object of %d bytes in a %d-byte buffer"
                             % (msg.length, self.region.size))
        qp = self._streams.get(stream)
        if qp is None or not qp.connected:
            raise ConnectionError("data stream %d has no connected RDMA "
                                  "queue pair" % stream)
        msg.addr = self.region.address_of(buf)
        msg.rkey = self.region.rkey
        conn.send(msg)

    def release_stream(self, stream):
        """Destroy a gone stream's queue pair: no more READs through it."""
        self._streams.drop(stream)

    def close(self):
        """Destroy the queue pairs, then deregister the pool and free the
        protection domain.  The pool's memory stays valid for views still
        held; it just cannot be read remotely any more.
        """
        self._streams.close()
        if not self._closed:
            self._closed = True
            self.pool.close()
            resources.quiet_close(self.region.mr)
            resources.quiet_close(self.pd)
        self.dev._forget_plane(self)


class RdmaSinkPlane(base.SinkPlane):
    """Sink: pull each object with RDMA READ into a registered buffer."""

    kind = protocol.DataPlane.RDMA
    acks_pull = True

    def __init__(self, dev, region):
        self.dev = dev
        self.region = region
        self._streams = _Streams(dev, region, 0, dev._pd)

    def accept(self, stream, remote):
        peer = endpoint_mod.Endpoint.decode(remote)
        qp = self._streams.create(stream)
        try:
            qp.connect(peer)
        except BaseException:
            self._streams.drop(stream, qp)
            raise
        return qp.endpoint().encode()

    def discard(self, conn, stream, msg):
        """Nothing to pull: the bytes stay in the source's memory, and
        BLOCK_PULLED frees them there.
        """

    def receive(self, conn, stream, msg, buf):
        if msg.length > len(buf.view):
            raise errors.BoundsError(
                "object of %d bytes does not fit a %d-byte buffer"
                % (msg.length, len(buf.view)))
        if not msg.length:
            return
        if not msg.addr:
            raise errors.ProtocolError("NEW_BLOCK over RDMA names no buffer")
        local = self.region.address_of(buf)
        qp = self._streams.get(stream)
        if qp is None:
            raise ConnectionError("data stream %d has no RDMA queue pair"
                                  % stream)
        with qp.lock:
            if qp.closing:
                raise ConnectionError("data stream %d was released" % stream)
            qp.read(local, self.region.lkey, msg.addr, msg.rkey, msg.length)

    def release_stream(self, stream):
        self._streams.drop(stream)

    def close(self):
        self._streams.close()
        self.dev._forget_plane(self)
