"""TCP data plane: object bytes follow their NEW_BLOCK frame."""

from dtn_migrate.transfer import protocol
from dtn_migrate.transfer.transport import base


class TcpSourcePlane(base.SourcePlane):
    kind = protocol.DataPlane.TCP
    releases_on_send = True

    def send(self, conn, stream, msg, buf, fd):
        if conn.can_sendfile and fd is not None and msg.length > 65536:
            # Zero-copy: the kernel sends straight from the page cache.
            # The bytes were read once already (into ``buf``) to compute
            # the object's xxh3; should they change in between, the sink
            # sees a mismatch and asks for the object again.
            conn.send(msg, sendfile=(fd, msg.offset, msg.length))
        else:
            conn.send(msg, payload=buf.view[:msg.length])


class TcpSinkPlane(base.SinkPlane):
    kind = protocol.DataPlane.TCP
    acks_pull = False

    def receive(self, conn, stream, msg, buf):
        conn.recv_into(buf.view, msg.length)
