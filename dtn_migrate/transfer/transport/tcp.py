"""TCP data plane: object bytes follow their NEW_BLOCK frame."""

from dtn_migrate.transfer import checksum
from dtn_migrate.transfer.transport import base
from dtn_migrate.transfer.wire import protocol


class TcpSourcePlane(base.SourcePlane):
    kind = protocol.DataPlane.TCP
    releases_on_send = True

    def send(self, conn, stream, msg, buf, fd):
        if buf is None:
            # Zero-copy: the kernel sends straight from the page cache.
            # The source read the bytes once already to compute the
            # object's xxh3; should they change in between, the sink sees
            # a mismatch and asks for the object again.
            conn.send(msg, sendfile=(fd, msg.offset, msg.length))
        else:
            conn.send(msg, payload=buf.view[:msg.length])


class TcpSinkPlane(base.SinkPlane):
    kind = protocol.DataPlane.TCP
    acks_pull = False
    hashes_mac = True           # receive() also feeds an object's HMAC

    def receive(self, conn, stream, msg, buf, mac=None):
        """Receive piece by piece, hashing each piece (xxh3, and ``mac``
        if given) while it is still in cache; returns the xxh3.
        """
        h = checksum.xxh3_stream()
        view = buf.view
        pos = 0
        while pos < msg.length:
            n = min(checksum.PIECE, msg.length - pos)
            piece = view[pos:pos + n]
            conn.recv_into(piece, n)
            h.update(piece)
            if mac is not None:
                mac.update(piece)
            pos += n
        return h.intdigest()
