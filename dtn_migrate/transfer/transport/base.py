"""Data planes: how one object's bytes get from source to sink.

Every session has a control connection and ``streams`` data connections,
all framed TCP (optionally TLS) connections (see ``stream.Connection``).
A data plane decides how the bytes of a NEW_BLOCK travel:

* TCP: the bytes follow the NEW_BLOCK frame on the data connection
  (``sendfile`` where the connection is plain TCP).
* RDMA: the NEW_BLOCK names a buffer in the source's registered memory
  and the sink pulls it with RDMA READ over the stream's RC queue pair,
  then answers BLOCK_PULLED so the source can reuse the buffer.

Endpoints (queue pair numbers, GIDs, ...) are opaque bytes exchanged in
the ``rdma`` field of each data connection's CONNECT / CONNECT_ACK.

Buffers come from a ``buffers.BufferPool``; with RDMA the pool is made by
``rdma.RdmaDevice.make_pool`` so that its memory is registered.
"""

import abc

from dtn_migrate.transfer import buffers


class SourcePlane(abc.ABC):
    """Source side of a data plane, one per session attempt."""

    kind = None                 # protocol.DataPlane value
    releases_on_send = True     # False: buffer is freed by BLOCK_PULLED

    def endpoint(self, stream):
        """Local endpoint of data stream ``stream`` for CONNECT.rdma."""
        return b""

    def attach(self, stream, remote):
        """Connect stream ``stream`` to the sink's endpoint ``remote``."""

    @abc.abstractmethod
    def send(self, conn, stream, msg, buf, fd):
        """Send object ``msg`` (a NewBlock) whose bytes are in
        ``buf.view[:msg.length]`` and at ``msg.offset`` of ``fd``.
        """

    def close(self):
        pass


class SinkPlane(abc.ABC):
    """Sink side of a data plane, one per session."""

    kind = None
    acks_pull = False           # True: send BLOCK_PULLED after receive

    def accept(self, stream, remote):
        """Accept the source's endpoint for ``stream``; return ours."""
        return b""

    @abc.abstractmethod
    def receive(self, conn, stream, msg, buf):
        """Fill ``buf.view[:msg.length]`` with the object's bytes; return
        their xxh3 if computed on the way (or None).
        """

    def discard(self, conn, stream, msg):
        """Consume object ``msg`` without keeping it (its file is gone).

        By default its bytes are received into scratch memory; a plane
        whose bytes do not follow the frame overrides this.
        """
        scratch = buffers.Buffer(-1, buffers.aligned(msg.length))
        self.receive(conn, stream, msg, scratch)

    def release_stream(self, stream):
        """Forget the endpoint of a data stream that has gone."""

    def close(self):
        pass
