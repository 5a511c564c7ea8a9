"""REQUEST connections: a request to the sink's side and its answer."""

import os
import threading
import time

from dtn_migrate.transfer import errors
from dtn_migrate.transfer import request
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.transfer import test_engine

KEY = test_engine.KEY


class RequestTest(test_engine.EngineTestCase):
    def start_sink(self, requests=None, handshake_timeout=10.0, **kw):
        server = sink.SinkServer(
            self.dst, self.cfg(handshake_timeout=handshake_timeout), "sink",
            lambda peer: KEY if peer == "source" else None,
            host="127.0.0.1", requests=requests, **kw)
        server.start()
        self.addCleanup(server.stop)
        return server

    def peer(self, server, key=KEY):
        return source.Peer("sink", "127.0.0.1", server.port, key)

    def ask(self, server, body, name="source", key=KEY, timeout=5):
        return request.send_request(self.peer(server, key), body, name,
                                    self.cfg(), timeout=timeout)

    def wait_idle(self, server, timeout=5):
        """Seconds until the sink holds no connection (its handler
        threads are done).
        """
        start = time.monotonic()
        while server.admission.counts()["connections"] and \
                time.monotonic() - start < timeout:
            time.sleep(0.02)
        self.assertEqual(0, server.admission.counts()["connections"])
        return time.monotonic() - start

    def test_round_trip(self):
        calls = []

        def requests(peer, body):
            calls.append((peer, body, threading.current_thread().name))
            return b"answer to " + body
        server = self.start_sink(requests)
        self.assertEqual(b'answer to {"delete":1}',
                         self.ask(server, b'{"delete":1}'))
        self.assertEqual([("source", b'{"delete":1}', "sink-conn")], calls)
        # No session, no record, nothing staged.
        self.assertEqual([], server.status())
        self.assertEqual({}, server.sessions)
        self.assertFalse(os.path.exists(os.path.join(self.dst,
                                                     ".dtn-partial")))

    def test_largest_request_and_answer(self):
        server = self.start_sink(lambda peer, body: body[::-1])
        body = os.urandom(P.MAX_REPORT)
        self.assertEqual(body[::-1], self.ask(server, body))
        self.assertEqual(b"", self.start_and_ask(lambda p, b: b""))

    def start_and_ask(self, requests, body=b"{}"):
        return self.ask(self.start_sink(requests), body)

    def test_sink_without_handler_refuses(self):
        server = self.start_sink()
        exc = self.assertRaises(errors.PeerError, self.ask, server, b"{}")
        self.assertIn("this DTN takes no requests", str(exc))
        self.assertEqual(errors.Code.PROTOCOL, exc.code)
        self.wait_idle(server)

    def test_failing_handler(self):
        def requests(peer, body):
            raise RuntimeError("secret internals")
        exc = self.assertRaises(errors.PeerError, self.start_and_ask,
                                requests)
        self.assertIn("the request failed on sink", str(exc))
        self.assertNotIn("secret", str(exc))
        self.assertNotIn("Traceback", str(exc))
        self.assertEqual(errors.Code.INTERNAL, exc.code)

    def test_handler_messages_reach_the_peer(self):
        def refused(peer, body):
            raise request.RequestFailed("the peer's engine did not answer")

        def bad(peer, body):
            raise ValueError("a request is a JSON mapping")
        exc = self.assertRaises(errors.PeerError, self.start_and_ask,
                                refused)
        self.assertIn("the peer's engine did not answer", str(exc))
        self.assertEqual(errors.Code.INTERNAL, exc.code)
        exc = self.assertRaises(errors.PeerError, self.start_and_ask, bad)
        self.assertIn("a request is a JSON mapping", str(exc))
        self.assertEqual(errors.Code.PROTOCOL, exc.code)

    def test_bad_answers_refused(self):
        for answer in (b"a" * (P.MAX_REPORT + 1), "text", None,
                       {"a": 1}):
            exc = self.assertRaises(errors.PeerError, self.start_and_ask,
                                    lambda p, b, a=answer: a)
            self.assertIn("not bytes", str(exc))

    def test_wrong_key_and_unknown_peer(self):
        calls = []
        server = self.start_sink(lambda p, b: calls.append(b) or b"x")
        self.assertRaises(errors.AuthenticationError, self.ask, server,
                          b"{}", key=b"x" * 32)
        self.assertRaises(errors.AuthenticationError, self.ask, server,
                          b"{}", name="mallory")
        self.assertEqual([], calls)

    def test_bad_bodies_refused_before_connecting(self):
        # Nothing listens there: a body is checked first.
        peer = source.Peer("sink", "127.0.0.1", 1, KEY)
        for body in (b"", b"r" * (P.MAX_REPORT + 1), "{}", None,
                     bytearray(b"{}")):
            self.assertRaises(ValueError, request.send_request, peer, body,
                              "source", self.cfg(), 1)

    def test_unreachable(self):
        server = self.start_sink(lambda p, b: b"x")
        port = server.port
        server.stop()
        peer = source.Peer("sink", "127.0.0.1", port, KEY)
        self.assertRaises(ConnectionError, request.send_request, peer,
                          b"{}", "source", self.cfg(), 2)

    def test_timeout_bounds_the_wait_for_the_answer(self):
        release = threading.Event()
        self.addCleanup(release.set)

        def requests(peer, body):
            release.wait(10)
            return b"late"
        server = self.start_sink(requests)
        start = time.monotonic()
        self.assertRaises(TimeoutError, self.ask, server, b"{}",
                          timeout=0.5)
        self.assertLess(time.monotonic() - start, 3)
        release.set()
        self.wait_idle(server)

    def connect(self, server):
        conn, ack = source.open_connection(self.peer(server), P.Connect(
            P.VERSION, P.VERSION, P.Role.REQUEST, 0, P.Caps.NONE,
            os.urandom(16), 0, self.cfg().object_size, 1, os.urandom(32),
            "source"), self.cfg())
        self.addCleanup(conn.close)
        self.assertEqual(0, ack.epoch)
        return conn

    def test_silent_asker_is_dropped(self):
        calls = []
        server = self.start_sink(lambda p, b: calls.append(b) or b"x",
                                 handshake_timeout=0.5)
        conn = self.connect(server)
        self.assertLess(self.wait_idle(server), 3)
        self.assertRaises((ConnectionError, errors.TransferError),
                          conn.recv)
        self.assertEqual([], calls)

    def test_trickling_asker_is_dropped(self):
        calls = []
        server = self.start_sink(lambda p, b: calls.append(b) or b"x",
                                 handshake_timeout=0.5)
        conn = self.connect(server)
        # A REPORT frame that never ends: a byte every 0.1 s, each read
        # well within the read timeout.
        conn.sock.sendall(P.HEADER.pack(P.MAGIC, P.VERSION,
                                        P.MsgType.REPORT, P.FLAG_TAG,
                                        1000, 0))
        stop = threading.Event()
        self.addCleanup(stop.set)

        def trickle():
            while not stop.wait(0.1):
                try:
                    conn.sock.sendall(b"r")
                except OSError:
                    return
        threading.Thread(target=trickle, daemon=True).start()
        self.assertLess(self.wait_idle(server), 3)
        stop.set()
        self.assertEqual([], calls)

    def test_oversized_frame_refused(self):
        server = self.start_sink(lambda p, b: b"x", handshake_timeout=2)
        conn = self.connect(server)
        conn.sock.sendall(P.HEADER.pack(P.MAGIC, P.VERSION,
                                        P.MsgType.REPORT, P.FLAG_TAG,
                                        request.MAX_FRAME_BODY + 1, 0))
        self.assertLess(self.wait_idle(server), 1.5)

    def test_report_without_body_refused(self):
        server = self.start_sink(lambda p, b: b"x")
        conn = self.connect(server)
        conn.send(P.Report(0))
        msg = conn.recv()
        self.assertIsInstance(msg, P.Error)
        self.assertIn("a request has a body", msg.message)
