"""Connection.send: frame and payload gathered in sendmsg, no copy."""

import socket
import threading


from dtn_migrate.transfer.transport import stream
from dtn_migrate.transfer.wire import protocol as P

from tests.unit import testcase


class _PartialSock:
    """Accepts at most ``step`` bytes per sendmsg, records them."""

    def __init__(self, step):
        self.step = step
        self.data = bytearray()
        self.calls = 0

    def sendmsg(self, views):
        self.calls += 1
        n = 0
        for v in views:
            take = min(len(v), self.step - n)
            self.data += v[:take]
            n += take
            if n == self.step:
                break
        return n

    def sendall(self, data):
        raise AssertionError("sendall used for a payload on plain TCP")


class TestSendv(testcase.TestCase):
    def test_partial_sends_resume_where_they_stopped(self):
        sock = _PartialSock(1000)
        conn = stream.Connection(sock, "peer")
        payload = memoryview(bytearray(range(256)) * 40)
        msg = P.Bye()
        conn.send(msg, payload=payload)
        frame = P.encode_frame(msg)
        self.assertEqual(frame + bytes(payload), bytes(sock.data))
        self.assertEqual(len(frame) + len(payload), conn.bytes_sent)
        self.assertEqual(-(-len(sock.data) // 1000), sock.calls)

    def test_over_a_socket(self):
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        conn = stream.Connection(a, "peer")
        payload = bytes(range(256)) * 8192      # 2 MiB: several sends
        got = bytearray()
        want = len(P.encode_frame(P.Bye())) + len(payload)

        def drain():
            while len(got) < want:
                got.extend(b.recv(1 << 20))
        th = threading.Thread(target=drain)
        th.start()
        conn.send(P.Bye(), payload=memoryview(payload))
        th.join(10)
        self.assertEqual(P.encode_frame(P.Bye()) + payload, bytes(got))
