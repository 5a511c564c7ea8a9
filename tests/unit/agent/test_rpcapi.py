"""What the agent's RPC client sends, and to which agent."""

from unittest import mock


from dtn_migrate.agent import ids
from dtn_migrate.agent import manager
from dtn_migrate.agent import rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc

from tests.unit import testcase


class TestAgentAPI(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.client = mock.Mock()
        self.patch(rpc, "get_client", lambda *a, **kw: self.client)
        self.api = rpcapi.AgentAPI()

    def sent(self):
        (prepare,) = self.client.prepare.call_args_list
        (call,) = self.client.prepare.return_value.call.call_args_list
        return prepare.kwargs["server"], call.args[1], call.kwargs

    def test_server_speaks_the_client_version(self):
        self.assertEqual(rpcapi.AgentAPI.VERSION,
                         manager.AgentManager.target.version)
        self.assertEqual("1.0", rpcapi.AgentAPI.VERSION)

    def test_ping_needs_the_staging_root(self):
        self.api.ping({}, "dtn1")
        self.assertEqual(("dtn1", "ping", {}), self.sent())

    def test_get_peer_report_sends_the_attempt(self):
        self.api.get_peer_report({}, "dtn1", "east", "t" * 32, attempt=3)
        self.assertEqual(("dtn1", "get_peer_report",
                          {"peer": "east", "transfer_id": "t" * 32,
                           "attempt": 3}), self.sent())

    def test_get_peer_report_default_attempt(self):
        self.api.get_peer_report({}, "dtn1", "east", "t" * 32)
        self.assertEqual(1, self.sent()[2]["attempt"])

    def test_list_incoming_gives_wanted_attempt(self):
        self.api.list_incoming({}, "dtn1")
        self.assertEqual(("dtn1", "list_incoming", {}), self.sent())

    def test_peer_health(self):
        self.api.peer_health({}, "dtn1", peer="east")
        self.assertEqual(("dtn1", "peer_health", {"peer": "east"}),
                         self.sent())

    def test_peer_health_of_every_peer(self):
        self.api.peer_health({}, "dtn1")
        self.assertEqual(("dtn1", "peer_health", {"peer": None}),
                         self.sent())

    def test_peer_request(self):
        self.api.peer_request({}, "dtn1", "east", {"action": "delete"})
        self.assertEqual(("dtn1", "peer_request",
                          {"peer": "east", "request": {"action": "delete"}}),
                         self.sent())
        # Without a timeout, the client's (an explicit None: for ever).
        self.assertNotIn("timeout", self.client.prepare.call_args.kwargs)

    def test_peer_request_timeout(self):
        self.api.peer_request({}, "dtn1", "east", {}, timeout=90)
        self.client.prepare.assert_called_once_with(server="dtn1",
                                                    timeout=90)


class TestIds(testcase.TestCase):
    def test_forms(self):
        hexid = "0123456789abcdef0123456789abcdef"
        for form in (hexid, hexid.upper(),
                     "01234567-89ab-cdef-0123-456789abcdef",
                     "{%s}" % hexid, "urn:uuid:%s" % hexid):
            self.assertEqual(hexid, ids.check_id(form))
        for bad in ("", "x", "../" + hexid, None, 7, b"0" * 16, hexid[:-1]):
            self.assertRaises(exception.InvalidInput, ids.check_id, bad)
