"""The protection endpoints of the engine's RPC server (1.4)."""

from unittest import mock

from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging import conffixture
import testtools

from dtn_migrate import context
from dtn_migrate.engine import manager
from dtn_migrate.engine import rpcapi
from dtn_migrate import exception
from dtn_migrate import rpc

PID = "a" * 32


def member():
    return context.RequestContext(project_id="p1", user_id="u1",
                                  is_admin=False, overwrite=False)


class TestEndpoints(testtools.TestCase):
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
                                    self.manager.start_drill, {},
                                    policy_id=PID)
            self.assertIs(error, exc.exc_info[1])
        # An empty context is the engine's own.
        self.assertTrue(self.drills.start.call_args.args[0].is_admin)

    def test_without_drills(self):
        bare = manager.EngineManager("controller", mock.Mock(),
                                     self.protection)
        exc = self.assertRaises(messaging.ExpectedException,
                                bare.start_drill, {}, policy_id=PID)
        self.assertIsInstance(exc.exc_info[1], exception.ConfigError)
        self.assertIn("no drills", str(exc.exc_info[1]))

    def test_empty_context_is_the_engines_own(self):
        self.manager.create_policy({}, values={})
        self.assertTrue(self.ctx_of("create").is_admin)

    def test_missing_arguments(self):
        self.manager.create_policy({})
        self.assertIsNone(self.protection.create.call_args.args[1])
        self.manager.update_policy({})
        self.assertEqual((None, None),
                         self.protection.update.call_args.args[1:])

    def test_errors_pass_through(self):
        self.protection.sync.side_effect = \
            exception.ProtectionPolicyConflict(policy_id=PID,
                                               state="disabled",
                                               action="sync")
        exc = self.assertRaises(messaging.ExpectedException,
                                self.manager.sync_policy, {},
                                policy_id=PID)
        self.assertIsInstance(exc.exc_info[1],
                              exception.ProtectionPolicyConflict)

    def test_without_protection(self):
        bare = manager.EngineManager("controller", mock.Mock())
        for call, kwargs in ((bare.create_policy, {"values": {}}),
                             (bare.update_policy, {"policy_id": PID,
                                                   "values": {}}),
                             (bare.delete_policy, {"policy_id": PID}),
                             (bare.sync_policy, {"policy_id": PID})):
            exc = self.assertRaises(messaging.ExpectedException, call, {},
                                    **kwargs)
            self.assertIsInstance(exc.exc_info[1], exception.ConfigError)
            self.assertIn("no protection policies", str(exc.exc_info[1]))


class TestOverRPC(testtools.TestCase):
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
        server = rpc.get_server(
            messaging.Target(topic=rpcapi.TOPIC, server="controller"),
            [manager.EngineManager("controller", mock.Mock(),
                                   self.protection, self.drills)],
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

    def test_expected_errors(self):
        self.protection.delete.side_effect = \
            exception.ProtectionPolicyNotFound(policy_id=PID)
        exc = self.assertRaises(exception.ProtectionPolicyNotFound,
                                self.api.delete_policy, {}, PID)
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
                                self.api.start_drill, {}, PID)
        self.assertEqual(409, exc.code)
