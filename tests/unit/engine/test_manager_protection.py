"""The protection endpoints of the engine's RPC server."""

from unittest import mock

from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging import conffixture

from dtn_migrate import context
from dtn_migrate.engine import manager
from dtn_migrate.engine import rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc

from tests.unit import testcase

PID = "a" * 32
#: What dtn-migrate-manage and the engine's own callers send.
ADMIN = context.get_service_context("tests").to_dict()


def member():
    return context.RequestContext(project_id="p1", user_id="u1",
                                  is_admin=False, overwrite=False)


class TestEndpoints(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.protection = mock.Mock()
        self.drills = mock.Mock()
        self.manager = manager.EngineManager("controller", mock.Mock(),
                                             self.protection, self.drills)

    def ctx_of(self, method):
        ctx = getattr(self.protection, method).call_args.args[0]
        self.assertIsInstance(ctx, context.RequestContext)
        return ctx

    def test_create(self):
        values = {"name": "gold", "peer": "b", "selector": {"tags": ["g"]}}
        self.assertIs(self.protection.create.return_value,
                      self.manager.create_policy(member().to_dict(),
                                                 values=values))
        self.assertEqual(values, self.protection.create.call_args.args[1])
        ctx = self.ctx_of("create")
        self.assertEqual(("p1", "u1", False),
                         (ctx.project_id, ctx.user_id, ctx.is_admin))

    def test_update(self):
        self.assertIs(self.protection.update.return_value,
                      self.manager.update_policy(member().to_dict(),
                                                 policy_id=PID,
                                                 values={"enabled": False}))
        self.assertEqual((PID, {"enabled": False}),
                         self.protection.update.call_args.args[1:])
        self.assertEqual("p1", self.ctx_of("update").project_id)

    def test_delete(self):
        self.assertIsNone(self.manager.delete_policy(member().to_dict(),
                                                     policy_id=PID))
        self.assertEqual((PID,), self.protection.delete.call_args.args[1:])
        self.assertEqual("p1", self.ctx_of("delete").project_id)

    def test_sync(self):
        self.assertIs(self.protection.sync.return_value,
                      self.manager.sync_policy(member().to_dict(),
                                               policy_id=PID))
        self.assertEqual((PID,), self.protection.sync.call_args.args[1:])

    def test_start_drill(self):
        self.assertIs(self.drills.start.return_value,
                      self.manager.start_drill(member().to_dict(),
                                               policy_id=PID, clone=True))
        ctx, policy_id, clone = self.drills.start.call_args.args
        self.assertIsInstance(ctx, context.RequestContext)
        self.assertEqual(("p1", "u1", False),
                         (ctx.project_id, ctx.user_id, ctx.is_admin))
        self.assertEqual((PID, True), (policy_id, clone))
        # clone is false unless asked for.
        self.manager.start_drill(member().to_dict(), policy_id=PID)
        self.assertEqual((PID, False),
                         self.drills.start.call_args.args[1:])
        self.assertFalse(self.protection.method_calls)

    def test_start_drill_errors_pass_through(self):
        for error in (exception.ProtectionPolicyNotFound(policy_id=PID),
                      exception.ProtectionPolicyConflict(
                          policy_id=PID, state="without replicas",
                          action="drill"),
                      exception.InvalidInput(reason="clone")):
            self.drills.start.side_effect = error
            exc = self.assertRaises(messaging.ExpectedException,
                                    self.manager.start_drill, ADMIN,
                                    policy_id=PID)
            self.assertIs(error, exc.exc_info[1])
        # A service context is an administrator's.
        self.assertTrue(self.drills.start.call_args.args[0].is_admin)

    def test_without_drills(self):
        bare = manager.EngineManager("controller", mock.Mock(),
                                     self.protection)
        exc = self.assertRaises(messaging.ExpectedException,
                                bare.start_drill, ADMIN, policy_id=PID)
        self.assertIsInstance(exc.exc_info[1], exception.ConfigError)
        self.assertIn("no drills", str(exc.exc_info[1]))

    def test_an_empty_context_is_refused(self):
        # It was taken for the engine's own (an administrator's); now a
        # caller names itself (a service context) or comes from the API.
        for call, kwargs in (
                (self.manager.create_policy, {"values": {}}),
                (self.manager.update_policy, {"policy_id": PID}),
                (self.manager.delete_policy, {"policy_id": PID}),
                (self.manager.sync_policy, {"policy_id": PID}),
                (self.manager.failover_policy, {"policy_id": PID}),
                (self.manager.failback_policy, {"policy_id": PID}),
                (self.manager.start_drill, {"policy_id": PID})):
            for ctxt in ({}, None, {"is_admin": False, "user": "u"}):
                exc = self.assertRaises(messaging.ExpectedException, call,
                                        ctxt, **kwargs)
                self.assertIsInstance(exc.exc_info[1], exception.Forbidden)
        self.assertFalse(self.protection.method_calls)
        self.assertFalse(self.drills.method_calls)
        self.manager.create_policy(ADMIN, values={})
        ctx = self.ctx_of("create")
        self.assertEqual((True, "tests"), (ctx.is_admin, ctx.user_name))

    def test_missing_arguments(self):
        self.manager.create_policy(ADMIN)
        self.assertIsNone(self.protection.create.call_args.args[1])
        self.manager.update_policy(ADMIN)
        self.assertEqual((None, None),
                         self.protection.update.call_args.args[1:])

    def test_errors_pass_through(self):
        self.protection.sync.side_effect = \
            exception.ProtectionPolicyConflict(policy_id=PID,
                                               state="disabled",
                                               action="sync")
        exc = self.assertRaises(messaging.ExpectedException,
                                self.manager.sync_policy, ADMIN,
                                policy_id=PID)
        self.assertIsInstance(exc.exc_info[1],
                              exception.ProtectionPolicyConflict)

    def test_a_preflight_is_answered_without_protection(self):
        migrations = mock.Mock()
        bare = manager.EngineManager("controller", migrations)
        request = {"action": "preflight", "options": {}}
        with mock.patch.object(manager.preflight, "answer") as answer:
            self.assertIs(answer.return_value, bare.peer_request(
                {}, peer="dtn-a", request=request))
        answer.assert_called_once_with(migrations.conf, migrations.res,
                                       "dtn-a", request)

    def test_without_protection(self):
        bare = manager.EngineManager("controller", mock.Mock())
        for call, kwargs in ((bare.create_policy, {"values": {}}),
                             (bare.update_policy, {"policy_id": PID,
                                                   "values": {}}),
                             (bare.delete_policy, {"policy_id": PID}),
                             (bare.sync_policy, {"policy_id": PID})):
            exc = self.assertRaises(messaging.ExpectedException, call,
                                    ADMIN, **kwargs)
            self.assertIsInstance(exc.exc_info[1], exception.ConfigError)
            self.assertIn("no protection policies", str(exc.exc_info[1]))


class TestFailoverEndpoints(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.failovers = mock.Mock()
        self.manager = manager.EngineManager("controller", mock.Mock(),
                                             mock.Mock(), mock.Mock(),
                                             self.failovers)

    def test_failover(self):
        self.assertIs(self.failovers.failover.return_value,
                      self.manager.failover_policy(member().to_dict(),
                                                   policy_id=PID))
        ctx, policy_id = self.failovers.failover.call_args.args
        self.assertIsInstance(ctx, context.RequestContext)
        self.assertEqual(("p1", "u1", False),
                         (ctx.project_id, ctx.user_id, ctx.is_admin))
        self.assertEqual(PID, policy_id)
        self.assertFalse(self.failovers.failback.called)

    def test_failback(self):
        self.assertIs(self.failovers.failback.return_value,
                      self.manager.failback_policy(member().to_dict(),
                                                   policy_id=PID))
        ctx, policy_id = self.failovers.failback.call_args.args
        self.assertEqual(("p1", PID), (ctx.project_id, policy_id))
        self.assertFalse(self.failovers.failover.called)

    def test_service_context_and_missing_argument(self):
        self.manager.failover_policy(ADMIN)
        ctx, policy_id = self.failovers.failover.call_args.args
        self.assertTrue(ctx.is_admin)
        self.assertIsNone(policy_id)

    def test_errors_pass_through(self):
        for call, method in ((self.manager.failover_policy, "failover"),
                             (self.manager.failback_policy, "failback")):
            error = exception.ProtectionPolicyConflict(
                policy_id=PID, state="a primary policy",
                action="fail over")
            getattr(self.failovers, method).side_effect = error
            exc = self.assertRaises(messaging.ExpectedException, call,
                                    ADMIN, policy_id=PID)
            self.assertIs(error, exc.exc_info[1])

    def test_without_failovers(self):
        for bare in (manager.EngineManager("controller", mock.Mock()),
                     manager.EngineManager("controller", mock.Mock(),
                                           mock.Mock(), mock.Mock())):
            for call in (bare.failover_policy, bare.failback_policy):
                exc = self.assertRaises(messaging.ExpectedException, call,
                                        ADMIN, policy_id=PID)
                self.assertIsInstance(exc.exc_info[1],
                                      exception.ConfigError)
                self.assertIn("no protection policies",
                              str(exc.exc_info[1]))

    def test_rpcapi_calls(self):
        api = rpcapi.EngineAPI(transport=mock.Mock())
        api.client = mock.Mock()
        for method in ("failover_policy", "failback_policy"):
            api.client.reset_mock()
            self.assertIs(api.client.call.return_value,
                          getattr(api, method)({}, PID))
            api.client.call.assert_called_once_with({}, method,
                                                    policy_id=PID)


class TestOverRPC(testcase.TestCase):
    """EngineAPI to EngineManager on oslo.messaging's fake transport."""

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        self.useFixture(conffixture.ConfFixture(conf))
        conf([], project="dtn-migrate-test")
        transport = messaging.get_rpc_transport(conf, url="fake:/")
        self.addCleanup(transport.cleanup)
        self.protection = mock.Mock()
        self.drills = mock.Mock()
        self.failovers = mock.Mock()
        server = rpc.get_server(
            messaging.Target(topic=rpcapi.TOPIC, server="controller"),
            [manager.EngineManager("controller", mock.Mock(),
                                   self.protection, self.drills,
                                   self.failovers)],
            transport=transport)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.api = rpcapi.EngineAPI(timeout=10, transport=transport)

    def test_calls(self):
        self.protection.create.return_value = {"id": PID}
        self.protection.update.return_value = {"id": PID, "enabled": False}
        self.protection.sync.return_value = {"policy": {"id": PID},
                                             "migrations": []}
        ctxt = member().to_dict()
        self.assertEqual({"id": PID}, self.api.create_policy(
            ctxt, {"name": "gold"}))
        self.assertEqual({"id": PID, "enabled": False},
                         self.api.update_policy(ctxt, PID,
                                                {"enabled": False}))
        self.assertIsNone(self.api.delete_policy(ctxt, PID))
        self.assertEqual({"policy": {"id": PID}, "migrations": []},
                         self.api.sync_policy(ctxt, PID))
        self.assertEqual({"name": "gold"},
                         self.protection.create.call_args.args[1])
        self.assertEqual("p1",
                         self.protection.delete.call_args.args[0].project_id)

    def test_an_empty_context_is_refused(self):
        exc = self.assertRaises(exception.Forbidden,
                                self.api.delete_policy, {}, PID)
        self.assertEqual(403, exc.code)
        self.assertIn("names no caller", str(exc))
        self.assertFalse(self.protection.delete.called)

    def test_expected_errors(self):
        self.protection.delete.side_effect = \
            exception.ProtectionPolicyNotFound(policy_id=PID)
        exc = self.assertRaises(exception.ProtectionPolicyNotFound,
                                self.api.delete_policy, ADMIN, PID)
        self.assertIn(PID, str(exc))

    def test_start_drill(self):
        self.drills.start.return_value = {"id": "d" * 32,
                                          "state": "running"}
        self.assertEqual({"id": "d" * 32, "state": "running"},
                         self.api.start_drill(member().to_dict(), PID,
                                              clone=True))
        ctx, policy_id, clone = self.drills.start.call_args.args
        self.assertEqual(("p1", PID, True), (ctx.project_id, policy_id,
                                             clone))
        self.api.start_drill(member().to_dict(), PID)
        self.assertIs(False, self.drills.start.call_args.args[2])

    def test_start_drill_errors(self):
        self.drills.start.side_effect = \
            exception.ProtectionPolicyConflict(policy_id=PID,
                                               state="without replicas",
                                               action="drill")
        exc = self.assertRaises(exception.ProtectionPolicyConflict,
                                self.api.start_drill, ADMIN, PID)
        self.assertEqual(409, exc.code)

    def test_failover_and_failback(self):
        self.failovers.failover.return_value = {
            "policy": {"id": PID, "role": "failed-over"},
            "reverse_policy": {"id": "r" * 32}, "promoted": 2}
        self.failovers.failback.return_value = {
            "policy": {"id": PID, "role": "replica"},
            "reverse_policy": {"id": "r" * 32, "enabled": False},
            "migrations": [], "complete": True}
        ctxt = member().to_dict()
        self.assertEqual(self.failovers.failover.return_value,
                         self.api.failover_policy(ctxt, PID))
        ctx, policy_id = self.failovers.failover.call_args.args
        self.assertEqual(("p1", "u1", PID),
                         (ctx.project_id, ctx.user_id, policy_id))
        self.assertEqual(self.failovers.failback.return_value,
                         self.api.failback_policy(ctxt, PID))
        ctx, policy_id = self.failovers.failback.call_args.args
        self.assertEqual(("p1", PID), (ctx.project_id, policy_id))
        self.assertFalse(self.protection.method_calls)

    def test_failover_errors(self):
        self.failovers.failover.side_effect = \
            exception.ProtectionPolicyConflict(
                policy_id=PID, state="a primary policy",
                action="fail over")
        exc = self.assertRaises(exception.ProtectionPolicyConflict,
                                self.api.failover_policy, ADMIN, PID)
        self.assertEqual(409, exc.code)
        self.failovers.failback.side_effect = \
            exception.ProtectionPolicyNotFound(policy_id=PID)
        exc = self.assertRaises(exception.ProtectionPolicyNotFound,
                                self.api.failback_policy, ADMIN, PID)
        self.assertIn(PID, str(exc))


class TestPeerRequestEndpoint(testcase.TestCase):
    """1.5: a peer cloud's request, from this cloud's DTN agent."""

    def setUp(self):
        super().setUp()
        self.protection = mock.Mock()
        self.manager = manager.EngineManager("controller", mock.Mock(),
                                             self.protection)

    def test_goes_to_the_deletions(self):
        request = {"action": "delete_replica"}
        handle = self.protection.peer_request
        self.assertIs(handle.return_value,
                      self.manager.peer_request({}, peer="dtn-a",
                                                request=request))
        handle.assert_called_once_with("dtn-a", request)

    def test_bad_peer_and_refusals_are_expected(self):
        for peer in (None, "", 7):
            exc = self.assertRaises(messaging.ExpectedException,
                                    self.manager.peer_request, {},
                                    peer=peer, request={})
            self.assertIsInstance(exc.exc_info[1], exception.InvalidInput)
        error = exception.InvalidInput(reason="unknown peer request")
        self.protection.peer_request.side_effect = error
        exc = self.assertRaises(messaging.ExpectedException,
                                self.manager.peer_request, {},
                                peer="dtn-a", request={})
        self.assertIs(error, exc.exc_info[1])

    def test_without_protection(self):
        bare = manager.EngineManager("controller", mock.Mock())
        exc = self.assertRaises(messaging.ExpectedException,
                                bare.peer_request, {}, peer="dtn-a",
                                request={})
        self.assertIsInstance(exc.exc_info[1], exception.ConfigError)
