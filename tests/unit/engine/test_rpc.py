"""The engine's RPC API, client and server, on oslo.messaging's in-process
fake transport.
"""

import time
from unittest import mock

from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging import conffixture
import testtools

from dtn_migrate.engine import manager
from dtn_migrate.engine import rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc

TID = "2" * 32
RID = "3" * 32


class TestEngineRPC(testtools.TestCase):
    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        self.useFixture(conffixture.ConfFixture(conf))
        conf([], project="dtn-migrate-test")
        self.transport = messaging.get_rpc_transport(conf, url="fake:/")
        self.addCleanup(self.transport.cleanup)
        self.migrations = mock.Mock()
        self.migrations.request.return_value = {"request_id": RID}
        server = rpc.get_server(
            messaging.Target(topic=rpcapi.TOPIC, server="controller"),
            [manager.EngineManager("controller", self.migrations)],
            transport=self.transport)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.api = rpcapi.EngineAPI(timeout=10, transport=self.transport)

    def wait_for(self, mocked):
        for _ in range(200):
            if mocked.called:
                return mocked.call_args
            time.sleep(0.02)
        self.fail("%s was not called" % mocked)

    def test_migrate_call_and_cast(self):
        self.assertEqual({"request_id": RID},
                         self.api.migrate({}, "b", images=["img"]))
        self.migrations.request.assert_called_once_with(
            "b", ["img"], None, None, None)
        self.migrations.request.reset_mock()
        self.assertIsNone(self.api.migrate_cast(
            {}, "b", selector={"tag": "dr"}, options={"mode": "serial"},
            request_id=RID))
        self.assertEqual(mock.call("b", None, {"tag": "dr"},
                                   {"mode": "serial"}, RID),
                         self.wait_for(self.migrations.request))

    def test_errors_reach_the_caller(self):
        self.migrations.request.side_effect = exception.PeerNotFound(
            peer="zz", known="b")
        self.assertRaises(exception.PeerNotFound, self.api.migrate, {},
                          "zz", images=["img"])

    def test_incoming_transfer_with_and_without_attempt(self):
        self.api.incoming_transfer({}, TID, "a")
        self.assertEqual(mock.call(TID, "a", None),
                         self.wait_for(self.migrations.incoming))
        self.migrations.incoming.reset_mock()
        self.api.incoming_transfer({}, TID, "a", attempt=3)
        self.assertEqual(mock.call(TID, "a", 3),
                         self.wait_for(self.migrations.incoming))

    def test_ping(self):
        self.assertEqual({"host": "controller"}, self.api.ping({}))


class TestEngineAPIVersions(testtools.TestCase):
    def test_attempt_needs_1_1(self):
        api = rpcapi.EngineAPI(transport=mock.Mock())
        api.client = mock.Mock()
        api.incoming_transfer({}, TID, "a")
        api.client.cast.assert_called_once_with(
            {}, "incoming_transfer", transfer_id=TID, peer="a")
        api.client.prepare.assert_not_called()
        api.incoming_transfer({}, TID, "a", attempt=2)
        api.client.prepare.assert_called_once_with(version="1.1")
        api.client.prepare.return_value.cast.assert_called_once_with(
            {}, "incoming_transfer", transfer_id=TID, peer="a", attempt=2)
        self.assertEqual("1.1", rpcapi.EngineAPI.VERSION)
        self.assertEqual("1.1", manager.EngineManager.target.version)
