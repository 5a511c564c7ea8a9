"""Requests between peer clouds over the DTN link: the agent's endpoint
(peer_request), the sink's handler that asks this cloud's engine, and
the engine client's call.
"""

import json
import os
import threading
from unittest import mock

import oslo_messaging as messaging

from dtn_migrate.agent import manager
from dtn_migrate.agent import requests
from dtn_migrate.engine import rpcapi as engine_rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc
from dtn_migrate.transfer import request as request_mod
from dtn_migrate.transfer.sink import server as sink
from dtn_migrate.transfer.wire import protocol as P
from tests.unit.agent import test_reports
from tests.unit.agent import test_service
from tests.unit import testcase

REQUEST = {"action": "delete", "image_id": "img-1", "policy_id": "p-1"}
ANSWER = {"deleted": True, "image_id": "img-1"}


class FakeEngine:
    """An EngineAPI answering peer_request with ``answer`` (or raising
    it), recording the calls.
    """

    def __init__(self, answer=None):
        self.answer = dict(ANSWER) if answer is None else answer
        self.calls = []

    def peer_request(self, ctxt, peer, request, timeout=None):
        self.calls.append((peer, request, timeout,
                           threading.current_thread().name))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class TestCodec(testcase.TestCase):
    def test_compact_and_sorted(self):
        raw = requests.encode({"b": 1, "a": [1, 2]})
        self.assertEqual(b'{"a":[1,2],"b":1}', raw)
        self.assertEqual({"b": 1, "a": [1, 2]}, requests.decode(raw))

    def test_refused(self):
        for bad in ([1], "x", None, {"x": float("nan")}, {"x": object()},
                    {"x": "y" * P.MAX_REPORT}):
            self.assertRaises(ValueError, requests.encode, bad)
        for raw in (b"[1]", b"{", b"\xff", b"null", b""):
            self.assertRaises(ValueError, requests.decode, raw)


class TestPeerRequests(testcase.TestCase):
    def handler(self, answer=None, timeout=30.0):
        self.engine = FakeEngine(answer)
        return requests.PeerRequests(lambda: self.engine, timeout)

    def test_answer_encoded(self):
        handler = self.handler()
        raw = handler("west", json.dumps(REQUEST).encode())
        self.assertEqual(requests.encode(ANSWER), raw)
        self.assertEqual([("west", REQUEST, 30.0)],
                         [c[:3] for c in self.engine.calls])

    def test_bad_bodies(self):
        handler = self.handler()
        for body in (b"not json", b"[1, 2]", b"\xff\xfe", b'"text"'):
            exc = self.assertRaises(ValueError, handler, "west", body)
            self.assertIn("a request is a JSON mapping", str(exc))
        self.assertEqual([], self.engine.calls)

    def test_engine_timeout(self):
        handler = self.handler(messaging.MessagingTimeout("no reply"),
                               timeout=5)
        exc = self.assertRaises(request_mod.RequestFailed, handler, "west",
                                b"{}")
        self.assertIn("the peer's engine did not answer within 5 s",
                      str(exc))

    def test_engine_failure_told_without_its_details(self):
        handler = self.handler(RuntimeError("db password in here"))
        exc = self.assertRaises(request_mod.RequestFailed, handler, "west",
                                b"{}")
        self.assertEqual("the peer's engine did not answer", str(exc))

    def test_engine_refusal_told_without_the_traceback(self):
        refusal = exception.InvalidInput(reason="not a replica")
        refusal.message += "\nTraceback (most recent call last):\n  ..."
        handler = self.handler(refusal)
        exc = self.assertRaises(request_mod.RequestFailed, handler, "west",
                                b"{}")
        self.assertIn("refused the request: Invalid input: not a replica",
                      str(exc))
        self.assertNotIn("Traceback", str(exc))

    def test_bad_answers(self):
        for answer in (["list"], "text", {"x": "y" * P.MAX_REPORT}):
            handler = self.handler(answer)
            self.assertRaises(request_mod.RequestFailed, handler, "west",
                              b"{}")


class TestPreflight(testcase.TestCase):
    """A preflight's staging room is the agent's to check: the engine
    is asked only when the transfer would fit (issue 37, 3).
    """

    TID = "ab" * 16

    def handler(self, room_error=None):
        self.engine = FakeEngine({"allowed": True})
        self.asked = []

        def room(peer, tid, size):
            self.asked.append((peer, tid, size))
            if room_error is not None:
                raise room_error
        return requests.PeerRequests(lambda: self.engine, 30.0, room=room)

    def request(self, **fields):
        req = {"action": "preflight", "options": {},
               "transfer_id": self.TID, "size": 5}
        req.update(fields)
        return requests.encode(req)

    def test_room_then_the_engine(self):
        handler = self.handler()
        self.assertEqual(requests.encode({"allowed": True}),
                         handler("west", self.request()))
        self.assertEqual([("west", self.TID, 5)], self.asked)
        self.assertEqual(1, len(self.engine.calls))

    def test_no_room_is_answered_by_the_agent(self):
        handler = self.handler(sink.sinkquota.QuotaError(
            "transfer x: more than its quota of 4 bytes"))
        with self.assertLogs("dtn_migrate.agent.requests", "WARNING"):
            answer = requests.decode(handler("west", self.request()))
        self.assertEqual({"allowed": False, "reason": "transfer x: more "
                          "than its quota of 4 bytes"}, answer)
        self.assertEqual([], self.engine.calls)

    def test_a_policy_preflight_names_no_transfer(self):
        handler = self.handler()
        handler("west", self.request(transfer_id=None, size=None))
        self.assertEqual([], self.asked)
        self.assertEqual(1, len(self.engine.calls))

    def test_malformed(self):
        handler = self.handler()
        for fields in ({"size": -1}, {"size": True}, {"size": "5"},
                       {"transfer_id": 5}):
            self.assertRaises(ValueError, handler, "west",
                              self.request(**fields))
        self.assertEqual([], self.engine.calls)


class TestManagerPeerRequest(test_service.ServiceTestCase):
    """"here" asks east's cloud over a real sink; east's engine is a
    fake.
    """

    def setUp(self):
        super().setUp()
        self.fake = FakeEngine()
        self.engine.peer_request = self.fake.peer_request

    def assertRaisesExpected(self, exc, func, *args):
        e = self.assertRaises(messaging.ExpectedException, func, *args)
        self.assertIsInstance(e.exc_info[1], exc)
        return e.exc_info[1]

    def test_answer_travels_back(self):
        east = self.start_east(peer_request_timeout=7)
        here = self.here(east)
        self.assertEqual(ANSWER, here.peer_request({}, "east", REQUEST))
        self.assertEqual([("here", REQUEST, 7.0, "sink-conn")],
                         self.fake.calls)
        self.assertEqual(7.0, east.manager.request_timeout)

    def test_bad_requests(self):
        here = self.here(self.start_east())
        for bad in (["not", "a", "mapping"], "text", None,
                    {"x": "y" * P.MAX_REPORT}, {"x": float("inf")}):
            self.assertRaisesExpected(exception.InvalidInput,
                                      here.peer_request, {}, "east", bad)
        for bad in ("", None, 7):
            self.assertRaisesExpected(exception.InvalidInput,
                                      here.peer_request, {}, bad, REQUEST)
        self.assertEqual([], self.fake.calls)

    def test_unknown_and_unreachable_peers(self):
        east = self.start_east()
        here = self.here(east)
        self.assertRaisesExpected(exception.PeerNotFound,
                                  here.peer_request, {}, "nope", REQUEST)
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        here.peer_request, {}, "gone",
                                        REQUEST)
        self.assertIn("gone cannot be reached", str(exc))
        wrong = manager.AgentManager("here", test_reports.FakeOutgoing(
            test_reports.FakePeers(east.sink.port, key=b"w" * 32),
            self.cfg), None)
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        wrong.peer_request, {}, "east",
                                        REQUEST)
        self.assertIn("authentication failed", str(exc))
        self.assertEqual([], self.fake.calls)

    def test_engine_failure_is_unreachable(self):
        self.fake.answer = messaging.MessagingTimeout("no reply")
        here = self.here(self.start_east(peer_request_timeout=3))
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        here.peer_request, {}, "east",
                                        REQUEST)
        self.assertIn("the peer's engine did not answer within 3", str(exc))

    def test_agent_without_engine_takes_no_requests(self):
        east = self.start_east(notify_engine=False)
        self.assertIsNone(east.sink.requests)
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        self.here(east).peer_request, {},
                                        "east", REQUEST)
        self.assertIn("this DTN takes no requests", str(exc))

    def test_answer_not_a_mapping(self):
        server = sink.SinkServer(
            os.path.join(self.tmp, "other"), self.cfg, "east",
            lambda peer: test_reports.KEY, host="127.0.0.1",
            requests=lambda peer, body: b"[1]").start()
        self.addCleanup(server.stop)
        here = manager.AgentManager("here", test_reports.FakeOutgoing(
            test_reports.FakePeers(server.port), self.cfg), None)
        exc = self.assertRaisesExpected(exception.PeerUnreachable,
                                        here.peer_request, {}, "east",
                                        REQUEST)
        self.assertIn("answer is not a JSON mapping", str(exc))

    def test_timeout_reaches_the_connection(self):
        here = manager.AgentManager("here", mock.Mock(), None,
                                    request_timeout=12.5)
        with mock.patch.object(request_mod, "send_request",
                               return_value=b"{}") as send:
            self.assertEqual({}, here.peer_request({}, "east", REQUEST))
        (call,) = send.call_args_list
        self.assertEqual(requests.encode(REQUEST), call.args[1])
        self.assertEqual(12.5, call.kwargs["timeout"])


class TestEngineClient(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.client = mock.Mock()
        self.patch(rpc, "get_client", lambda *a, **kw: self.client)
        self.api = engine_rpcapi.EngineAPI()

    def test_timeout(self):
        self.api.peer_request({}, "west", REQUEST, timeout=60)
        self.client.prepare.assert_called_once_with(timeout=60)
        self.client.prepare.return_value.call.assert_called_once_with(
            {}, "peer_request", peer="west", request=REQUEST)

    def test_default_timeout_is_the_clients(self):
        # An explicit timeout=None would wait for ever.
        self.api.peer_request({}, "west", REQUEST)
        self.client.prepare.assert_called_once_with()
