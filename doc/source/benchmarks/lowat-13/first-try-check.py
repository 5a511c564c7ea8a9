"""Run test_stream_recv against the first try's receive: the mark set to
the piece, then a blocking recv (copies what is there, then waits)."""
import socket, sys, unittest
from dtn_migrate.transfer.transport import stream
def _recv_some(self, view, got, n, flags):
    if self._poll is None or n - got < stream.LOW_WATER_MIN:
        self._set_mark(1)
    else:
        self._set_mark(n)
    try:
        return self.sock.recv_into(view[got:n], n - got, flags)
    except OSError as exc:
        raise ConnectionError(str(exc))
stream.Connection._recv_some = _recv_some
from tests.unit.transfer.transport import test_stream_recv as m
r = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromModule(m))
