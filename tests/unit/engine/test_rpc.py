"""The engine's RPC API, client and server, on oslo.messaging's in-process
fake transport.
"""

import datetime
import logging
import time
from unittest import mock

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging import conffixture

from dtn_migrate import context
from dtn_migrate.engine import events
from dtn_migrate.engine import manager
from dtn_migrate.engine import rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc

from tests.unit import testcase

TID = "2" * 32
RID = "3" * 32
MID = "4" * 32
#: What dtn-migrate-manage and the engine's own callers send.
ADMIN = context.get_service_context("tests").to_dict()


class TestEngineRPC(testcase.TestCase):
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
                         self.api.migrate(ADMIN, "b", images=["img"]))
        call = self.migrations.request.call_args
        self.assertEqual(("b", ["img"], None, None, None), call.args)
        # A service context: an administrator's, naming its component.
        self.assertEqual((True, "tests"), (call.kwargs["context"].is_admin,
                                           call.kwargs["context"].user_name))
        self.migrations.request.reset_mock()
        self.assertIsNone(self.api.migrate_cast(
            ADMIN, "b", selector={"tag": "dr"}, options={"mode": "serial"},
            request_id=RID))
        call = self.wait_for(self.migrations.request)
        self.assertEqual(("b", None, {"tag": "dr"}, {"mode": "serial"},
                          RID), call.args)

    def test_an_empty_context_is_refused(self):
        # It was taken for an administrator's: anything on the bus that
        # sent none saw every project's migrations.
        calls = (lambda c: self.api.migrate(c, "b", images=["img"]),
                 lambda c: self.api.get_migration(c, MID),
                 lambda c: self.api.list_migrations(c),
                 lambda c: self.api.cancel_migration(c, MID),
                 lambda c: self.api.retry_migration(c, MID),
                 lambda c: self.api.list_peers(c),
                 lambda c: self.api.get_peer(c, "b"))
        # Nor does a user's context without a project scope anything.
        for ctxt in ({}, {"is_admin": False, "user": "u1"}):
            for call in calls:
                err = self.assertRaises(exception.Forbidden, call, ctxt)
                self.assertEqual(403, err.code)
        self.assertEqual([], self.migrations.mock_calls)
        self.assertFalse(self.migrations.res.agent.peer_health.called)

    def test_the_caller_is_logged(self):
        logged = self.useFixture(fixtures.FakeLogger(
            name="dtn_migrate.engine.manager", level=logging.INFO))
        ctxt = context.RequestContext(user_id="u1", project_id="p1",
                                      roles=["member"],
                                      request_id="req-1").to_dict()
        self.migrations.get.return_value = self.record()
        self.migrations.events.return_value = []
        self.migrations.list.return_value = []
        self.api.get_migration(ctxt, MID)
        self.api.list_migrations(ADMIN)
        self.assertIn("get_migration by user u1 project p1 request req-1",
                      logged.output)
        self.assertIn("list_migrations by user tests project - request "
                      "%s (admin)" % ADMIN["request_id"], logged.output)

    def test_context_reaches_the_request(self):
        ctxt = context.RequestContext(user_id="u1", project_id="p1",
                                      roles=["member"],
                                      auth_token="tok").to_dict()
        self.api.migrate(ctxt, "b", images=["img"], request_id=RID)
        ctx = self.migrations.request.call_args.kwargs["context"]
        self.assertEqual(("u1", "p1", "tok", False),
                         (ctx.user_id, ctx.project_id, ctx.auth_token,
                          ctx.is_admin))

    def record(self, **values):
        rec = {"migration_id": MID, "id": MID, "state": "running",
               "bytes_export": 10, "bytes_transfer": None,
               "bytes_import": None,
               "created_at": datetime.datetime(2026, 11, 24, 10, 0, 0, 5)}
        rec.update(values)
        return rec

    def test_rows_have_iso_times_bytes_and_events(self):
        self.migrations.get.return_value = self.record()
        self.migrations.events.return_value = [{
            "stage": "export", "event": "started", "message": None,
            "bytes": 0,
            "created_at": datetime.datetime(2026, 11, 24, 10, 0, 1)}]
        row = self.api.get_migration(ADMIN, MID)
        self.assertEqual("2026-11-24T10:00:00.000005", row["created_at"])
        self.assertEqual({"export": 10, "transfer": 0, "import": 0},
                         row["bytes"])
        self.assertEqual([("export", "started",
                           "2026-11-24T10:00:01.000000")],
                         [(e["stage"], e["event"], e["created_at"])
                          for e in row["events"]])
        self.migrations.get.assert_called_once_with(MID, None)

    def test_a_member_sees_its_project_only(self):
        ctxt = context.RequestContext(user_id="u1", project_id="p1",
                                      roles=["member"]).to_dict()
        self.migrations.list.return_value = [self.record()]
        self.migrations.cancel.return_value = self.record(state="cancelled")
        self.migrations.retry.return_value = self.record(state="queued")
        self.migrations.get.return_value = self.record()
        self.migrations.events.return_value = []
        rows = self.api.list_migrations(ctxt, filters={"state": "running"},
                                        limit=5, marker=MID,
                                        sort_keys=["peer"],
                                        sort_dirs=["asc"])
        self.assertEqual([MID], [r["id"] for r in rows])
        self.migrations.list.assert_called_once_with(
            None, None, {"state": "running"}, MID, 5, ["peer"], ["asc"],
            project_id="p1")
        self.api.get_migration(ctxt, MID)
        self.migrations.get.assert_called_once_with(MID, "p1")
        self.assertEqual("cancelled",
                         self.api.cancel_migration(ctxt, MID)["state"])
        self.migrations.cancel.assert_called_once_with(MID, "p1")
        self.assertEqual("queued",
                         self.api.retry_migration(ctxt, MID)["state"])
        self.migrations.retry.assert_called_once_with(MID, "p1")

    def test_retry_conflict_reaches_the_caller(self):
        self.migrations.retry.side_effect = \
            exception.MigrationStateConflict(migration_id=MID,
                                             state="complete",
                                             action="retry")
        err = self.assertRaises(exception.MigrationStateConflict,
                                self.api.retry_migration, ADMIN, MID)
        self.assertEqual(409, err.code)

    def test_peers_from_the_agent(self):
        health = [{"name": "b", "reachable": True, "rtt_ms": 1.5},
                  {"name": "c", "reachable": False, "rtt_ms": None}]
        agent = self.migrations.res.agent
        self.migrations.res.agent_host = "dtn-a"
        agent.peer_health.return_value = health
        self.assertEqual(health, self.api.list_peers(ADMIN))
        agent.peer_health.assert_called_once_with({}, "dtn-a")
        agent.peer_health.reset_mock()
        agent.peer_health.return_value = health[1:]
        self.assertEqual(health[1], self.api.get_peer(ADMIN, "c"))
        agent.peer_health.assert_called_once_with({}, "dtn-a", peer="c")
        agent.peer_health.side_effect = exception.PeerNotFound(
            peer="zz", known="b, c")
        self.assertRaises(exception.PeerNotFound, self.api.get_peer, ADMIN,
                          "zz")

    def test_errors_reach_the_caller(self):
        self.migrations.request.side_effect = exception.PeerNotFound(
            peer="zz", known="b")
        self.assertRaises(exception.PeerNotFound, self.api.migrate, ADMIN,
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


class TestEngineAPIVersions(testcase.TestCase):
    def test_the_first_release_is_1_0(self):
        self.assertEqual("1.0", rpcapi.EngineAPI.VERSION)
        self.assertEqual("1.0", manager.EngineManager.target.version)

    def test_incoming_transfer_is_a_cast_with_the_attempt(self):
        api = rpcapi.EngineAPI(transport=mock.Mock())
        api.client = mock.Mock()
        api.incoming_transfer({}, TID, "a", attempt=2)
        api.client.cast.assert_called_once_with(
            {}, "incoming_transfer", transfer_id=TID, peer="a", attempt=2)
        api.client.prepare.assert_not_called()

    def test_calls_pin_no_version(self):
        api = rpcapi.EngineAPI(transport=mock.Mock())
        api.client = mock.Mock()
        for call in (lambda: api.retry_migration({}, MID),
                     lambda: api.list_peers({}),
                     lambda: api.get_peer({}, "b"),
                     lambda: api.list_migrations({}, request_id=RID),
                     lambda: api.list_migrations({}, limit=3)):
            call()
        api.client.prepare.assert_not_called()
        self.assertEqual(5, api.client.call.call_count)


class TestTransferEvent(testcase.TestCase):
    """1.3: the agent's pushed events reach the engine's event board."""

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        self.useFixture(conffixture.ConfFixture(conf))
        conf([], project="dtn-migrate-test")
        self.transport = messaging.get_rpc_transport(conf, url="fake:/")
        self.addCleanup(self.transport.cleanup)
        self.migrations = mock.Mock()
        self.migrations.res.events = events.EventBoard()
        server = rpc.get_server(
            messaging.Target(topic=rpcapi.TOPIC, server="controller"),
            [manager.EngineManager("controller", self.migrations)],
            transport=self.transport)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.api = rpcapi.EngineAPI(timeout=5, transport=self.transport)

    def test_cast_lands_on_the_board(self):
        board = self.migrations.res.events
        k = events.key(events.WATERMARK, TID, "x/image.data")
        self.api.transfer_event({}, events.WATERMARK, TID, "x/image.data",
                                {"durable": 4096, "state": "receiving"})
        self.assertTrue(board.wait(k, 0, 5))
        self.assertEqual({"durable": 4096, "state": "receiving"},
                         board.get(k)[2])
        self.assertTrue(board.pushing(events.WATERMARK, 60))
        self.assertFalse(board.pushing(events.REPORT, 60))

    def test_an_event_handled_late_is_dropped(self):
        board = self.migrations.res.events
        k = events.key(events.WATERMARK, TID, "f")
        m = manager.EngineManager("controller", self.migrations)
        m.transfer_event({}, events.WATERMARK, TID, "f", {"state": "done"},
                         origin=["run1", 7])
        m.transfer_event({}, events.WATERMARK, TID, "f", {"state": "open"},
                         origin=["run1", 6])
        self.assertEqual({"state": "done"}, board.get(k)[2])
        # A restarted agent numbers from 1 again.
        m.transfer_event({}, events.WATERMARK, TID, "f", {"state": "open"},
                         origin=["run2", 1])
        self.assertEqual({"state": "open"}, board.get(k)[2])
        m.transfer_event({}, events.WATERMARK, TID, "f", {"state": "x"},
                         origin="nonsense")
        self.assertEqual({"state": "open"}, board.get(k)[2])

    def test_bad_event_is_ignored(self):
        board = self.migrations.res.events
        self.api.transfer_event({}, "gossip", TID, None, None)
        self.api.transfer_event({}, events.REPORT, "short", None, None)
        # A good one after them: once it arrived, the bad ones were seen.
        k = events.key(events.REPORT, TID)
        self.api.transfer_event({}, events.REPORT, TID, None, {"state": "x"})
        self.assertTrue(board.wait(k, 0, 5))
        self.assertEqual([k], list(board.items))

    def test_a_cast_to_every_engine(self):
        api = rpcapi.EngineAPI(transport=mock.Mock())
        api.client = mock.Mock()
        api.transfer_event({}, events.REPORT, TID, info=None)
        api.client.prepare.assert_called_once_with(fanout=True)
        api.client.prepare.return_value.cast.assert_called_once_with(
            {}, "transfer_event", kind="report", transfer_id=TID, name=None,
            info=None, origin=None)
