"""REPORT connections, transfer ownership and the sink's session
callbacks.
"""

import dataclasses
import os
import struct
import threading
import time
import uuid
import zlib


from dtn_migrate.transfer import errors
from dtn_migrate.transfer import report
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.source import transfer as source
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.transfer import test_engine
from tests.unit import utils as test_utils
from tests.unit import testcase

KEY = test_engine.KEY
MiB = test_engine.MiB
TID = bytes(range(16))
NONCE = bytes(range(32))


def decode(cls, body):
    return P.decode_body(cls.TYPE, bytes(body), zlib.crc32(body))


def roundtrip(msg):
    frame = P.encode_frame(msg)
    mtype, length, crc = P.parse_header(frame[:P.HEADER_SIZE])
    return P.decode_body(mtype, frame[P.HEADER_SIZE:], crc)


def report_connect(**kw):
    msg = P.Connect(P.VERSION, P.VERSION, P.Role.REPORT, 0, 0, TID, 0,
                    4 << 20, 1, NONCE, "source")
    return dataclasses.replace(msg, **kw)


class ReportMessageTest(testcase.TestCase):
    def test_round_trip(self):
        for msg in (P.Report(0), P.Report(1, b'{"state":"active"}'),
                    P.Report(1, b""), P.Report(1, b"r" * P.MAX_REPORT)):
            self.assertEqual(msg, roundtrip(msg))

    def test_oversize_body_refused(self):
        body = struct.pack("!BI", 1, P.MAX_REPORT + 1) + \
            b"r" * (P.MAX_REPORT + 1)
        self.assertRaises(errors.BoundsError, decode, P.Report, body)
        self.assertRaises(errors.BoundsError,
                          P.Report(1, b"r" * (P.MAX_REPORT + 1)).validate)

    def test_bad_flags_refused(self):
        self.assertRaises(errors.BoundsError, P.Report(2).validate)
        self.assertRaises(errors.BoundsError, P.Report(0, b"x").validate)
        self.assertRaises(errors.TruncatedFrame, decode, P.Report,
                          struct.pack("!BI", 1, 10) + b"short")

    def test_report_role_round_trips(self):
        msg = report_connect()
        self.assertEqual(msg, roundtrip(msg))

    def test_report_role_bounds(self):
        for field, value in (("streams", 2), ("stream", 1),
                             ("epoch", P.MAX_ATTEMPT + 1),
                             ("epoch", 0xFFFFFFFF), ("rdma", b"endpoint"),
                             ("role", 4), ("object_size", 0)):
            msg = report_connect(**{field: value})
            self.assertRaises(errors.BoundsError, roundtrip, msg)

    def test_report_epoch_is_the_attempt(self):
        for attempt in (0, 1, 7, P.MAX_ATTEMPT):
            msg = report_connect(epoch=attempt)
            self.assertEqual(attempt, roundtrip(msg).epoch)


class SinkTestCase(test_engine.EngineTestCase):
    def start_sink(self, peers=("source", "other"), **kw):
        server = sink.SinkServer(self.dst, self.cfg(), "sink",
                                 lambda peer: KEY if peer in peers
                                 else None, host="127.0.0.1", **kw)
        server.start()
        self.addCleanup(server.stop)
        return server

    def query(self, server, tid, name="source", key=KEY):
        peer = source.Peer("sink", "127.0.0.1", server.port, key)
        return report.query_report(peer, tid, name, self.cfg(), timeout=5)

    def send(self, server, tid, name="f"):
        if not os.path.exists(os.path.join(self.src, name)):
            test_engine.write_file(os.path.join(self.src, name), MiB, 1)
        status = self.run_transfer(self.transfer(server.port, [name],
                                                 transfer_id=tid))
        self.assertEqual("complete", status["state"], status["error"])


class SinkReportTest(SinkTestCase):
    def test_no_reports_callable(self):
        server = self.start_sink()
        self.assertIsNone(self.query(server, uuid.uuid4().hex))

    def test_found_and_not_found(self):
        tid, other = uuid.uuid4().hex, uuid.uuid4().hex
        asked = []

        def reports(t, peer, attempt):
            asked.append((t, peer, attempt))
            return b'{"state":"active"}' if t == tid else None
        server = self.start_sink(reports=reports)
        self.assertEqual(b'{"state":"active"}', self.query(server, tid))
        self.assertIsNone(self.query(server, bytes.fromhex(other)))
        self.assertEqual([(tid, "source", 0), (other, "source", 0)], asked)

    def test_attempt_reaches_the_lookup(self):
        asked = []

        def reports(t, peer, attempt):
            asked.append(attempt)
            return None
        server = self.start_sink(reports=reports)
        peer = source.Peer("sink", "127.0.0.1", server.port, KEY)
        tid = uuid.uuid4().hex
        for attempt in (1, 3, P.MAX_ATTEMPT):
            self.assertIsNone(report.query_report(
                peer, tid, "source", self.cfg(), timeout=5,
                attempt=attempt))
        self.assertEqual([1, 3, P.MAX_ATTEMPT], asked)
        for bad in (-1, P.MAX_ATTEMPT + 1, True, "2", None, 1.0):
            self.assertRaises(ValueError, report.query_report, peer, tid,
                              "source", self.cfg(), 5, bad)
        self.assertEqual(3, len(asked))

    def test_creates_no_record_or_session(self):
        server = self.start_sink(reports=lambda t, p, a: b"{}")
        tid = uuid.uuid4().hex
        self.assertEqual(b"{}", self.query(server, tid))
        self.assertEqual([], server.status())
        self.assertEqual({}, server.sessions)
        self.assertFalse(os.path.exists(os.path.join(
            self.dst, ".dtn-partial", tid)))

    def test_wrong_peer_gets_nothing(self):
        tid = uuid.uuid4().hex
        asked = []

        def reports(t, peer, attempt):
            asked.append(peer)
            return b"secret"
        server = self.start_sink(reports=reports)
        self.send(server, tid)
        self.assertIsNone(self.query(server, tid, name="other"))
        # The sink knew who sent it: the lookup was not even made.
        self.assertEqual([], asked)
        self.assertEqual(b"secret", self.query(server, tid))

    def test_wrong_key_and_unknown_peer(self):
        server = self.start_sink(reports=lambda t, p, a: b"secret")
        tid = uuid.uuid4().hex
        self.assertRaises(errors.AuthenticationError, self.query, server,
                          tid, key=b"x" * 32)
        self.assertRaises(errors.AuthenticationError, self.query, server,
                          tid, name="mallory")

    def test_unreachable(self):
        server = self.start_sink()
        port = server.port
        server.stop()
        peer = source.Peer("sink", "127.0.0.1", port, KEY)
        self.assertRaises(ConnectionError, report.query_report, peer,
                          uuid.uuid4().hex, "source", self.cfg(), 2)

    def test_bad_transfer_id(self):
        server = self.start_sink()
        for tid in ("../../etc", "ab", b"short", 7):
            self.assertRaises(ValueError, self.query, server, tid)

    def test_failing_lookup_answers_not_found(self):
        answers = [RuntimeError("boom"), b"r" * (P.MAX_REPORT + 1),
                   "not bytes", b"ok"]

        def reports(t, peer, attempt):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        server = self.start_sink(reports=reports)
        tid = uuid.uuid4().hex
        for _ in range(3):
            self.assertIsNone(self.query(server, tid))
        self.assertEqual(b"ok", self.query(server, tid))


class OnIncomingTest(SinkTestCase):
    def wait_calls(self, calls, n, timeout=10):
        test_utils.wait_until(lambda: len(calls) >= n, timeout,
                              interval=0.01)
        time.sleep(0.1)        # and no more than that
        return list(calls)

    def test_called_once_per_control_session(self):
        calls = []
        server = self.start_sink(
            on_incoming=lambda *args: calls.append(args))
        tid = uuid.uuid4().hex
        self.send(server, tid)
        self.assertEqual([(tid, "source", 1)], self.wait_calls(calls, 1))
        # The same transfer again: a second session (its file skipped).
        self.send(server, tid)
        self.assertEqual([(tid, "source", 1), (tid, "source", 2)],
                         self.wait_calls(calls, 2))
        # A REPORT connection is no session.
        self.query(server, tid)
        self.assertEqual(2, len(self.wait_calls(calls, 3, timeout=0.2)))

    def test_raising_callback_does_not_break_a_transfer(self):
        calls = []

        def on_incoming(*args):
            calls.append(args)
            raise RuntimeError("engine is down")
        server = self.start_sink(on_incoming=on_incoming)
        tid = uuid.uuid4().hex
        self.send(server, tid)
        self.assertSameFile("f")
        self.assertEqual(1, server.status(tid)["files_done"])
        self.send(server, uuid.uuid4().hex, "g")
        self.assertSameFile("g")
        self.assertEqual(2, len(self.wait_calls(calls, 2)))

    def test_blocking_callback_does_not_stall_a_transfer(self):
        release = threading.Event()
        calls = []

        def on_incoming(*args):
            calls.append(args)
            release.wait(30)
        server = self.start_sink(on_incoming=on_incoming)
        self.addCleanup(release.set)
        tid1, tid2 = uuid.uuid4().hex, uuid.uuid4().hex
        self.send(server, tid1)
        self.send(server, tid2, "g")
        self.assertSameFile("g")
        self.assertEqual([tid1], [c[0] for c in calls])
        release.set()
        self.assertEqual([tid1, tid2],
                         [c[0] for c in self.wait_calls(calls, 2)])

    def test_deferred_calls_run_in_order_after_notices(self):
        calls = []
        server = self.start_sink(
            on_incoming=lambda *args: calls.append(("incoming",) + args))
        tid = uuid.uuid4().hex
        self.send(server, tid)
        server.defer(calls.append, ("deferred", tid))
        server.defer(lambda: 1 / 0)           # logged, nothing else
        server.defer(calls.append, ("after", tid))
        self.assertEqual([("incoming", tid, "source", 1), ("deferred", tid),
                          ("after", tid)], self.wait_calls(calls, 3))


class SessionCallbackTest(SinkTestCase):
    def test_recorded_before_the_acknowledgement(self):
        calls = []

        def on_session(*args):
            # On the connection's thread, the session set up, the source
            # still waiting for CONNECT_ACK.
            calls.append(args + (threading.current_thread().name,
                                 len(server.sessions)))
        server = self.start_sink(on_session=on_session)
        tid = uuid.uuid4().hex
        self.send(server, tid)
        self.send(server, tid)
        self.assertEqual([(tid, "source", 1, "sink-conn", 1),
                          (tid, "source", 2, "sink-conn", 1)], calls)

    def test_failing_callback_does_not_break_a_transfer(self):
        def on_session(*args):
            raise OSError("disk full")
        server = self.start_sink(on_session=on_session)
        self.send(server, uuid.uuid4().hex)
        self.assertSameFile("f")


class OwnerTest(SinkTestCase):
    """The recorded owner of a transfer (across restarts) is the only
    peer that may send it or read its report.
    """

    def test_another_peer_is_refused(self):
        tid = uuid.uuid4().hex
        sessions, asked = [], []

        def reports(t, peer, attempt):
            asked.append(peer)
            return b"secret"
        server = self.start_sink(owner=lambda t: "other" if t == tid
                                 else None,
                                 on_session=lambda *a: sessions.append(a),
                                 reports=reports)
        test_engine.write_file(os.path.join(self.src, "f"), MiB, 1)
        status = self.run_transfer(self.transfer(
            server.port, ["f"], transfer_id=tid,
            cfg=self.cfg(reconnect_deadline=0.5)))
        self.assertEqual("failed", status["state"])
        self.assertIn("belongs to another peer", status["error"])
        self.assertEqual([], sessions)
        self.assertEqual([], server.status())
        self.assertFalse(os.path.exists(os.path.join(self.dst, "f")))
        self.assertFalse(os.path.exists(os.path.join(
            self.dst, ".dtn-partial", tid)))
        # Nor does it read the owner's report.
        self.assertIsNone(self.query(server, tid))
        self.assertEqual([], asked)
        self.assertEqual(b"secret", self.query(server, tid, name="other"))
        # Transfers it owns, or nobody does, go through.
        self.send(server, uuid.uuid4().hex)
        self.assertSameFile("f")

    def test_refusal_is_an_authentication_error(self):
        server = self.start_sink(owner=lambda t: "other")
        peer = source.Peer("sink", "127.0.0.1", server.port, KEY)
        exc = self.assertRaises(errors.PeerError, source.open_connection,
                                peer, P.Connect(
                                    P.VERSION, P.VERSION, P.Role.CONTROL,
                                    0, 0, TID, 0,
                                    1 << 20, 1, NONCE, "source"),
                                self.cfg())
        self.assertEqual(errors.Code.AUTH, exc.code)

    def test_the_owner_of_this_run_wins(self):
        # A record made in this run answers before the callback.
        looked = []

        def owner(t):
            looked.append(t)
            return None
        server = self.start_sink(owner=owner)
        tid = uuid.uuid4().hex
        self.send(server, tid)
        self.assertEqual([tid], looked)
        self.assertIsNone(self.query(server, tid, name="other"))
        self.assertEqual([tid], looked)

    def test_failing_lookup_refuses(self):
        def owner(t):
            raise OSError("unreadable")
        server = self.start_sink(owner=owner,
                                 reports=lambda t, p, a: b"secret")
        tid = uuid.uuid4().hex
        test_engine.write_file(os.path.join(self.src, "f"), MiB, 1)
        status = self.run_transfer(self.transfer(
            server.port, ["f"], transfer_id=tid,
            cfg=self.cfg(reconnect_deadline=0.5)))
        self.assertEqual("failed", status["state"])
        self.assertRaises(errors.PeerError, self.query, server, tid)
