"""openstack dtn failover/failback against the real API (noauth2,
SQLite, the API tests' fake engine) over HTTP.
"""

import json
from unittest import mock

from osc_lib import exceptions

from dtn_migrate.osc.v1 import protection_policies as commands
from tests.unit.api import base as api_base
from tests.unit.client import test_real_api
from tests.unit.osc.v1 import test_real_api as osc_real_api


class TestFailoverCommands(test_real_api.RealApiTestCase):

    def setUp(self):
        super().setUp()
        # The runbooks' operator: an admin, whose project is not the
        # one the replicas (and so the policy) belong to.
        self.use_persona("admin")
        self.policy = self.add_policy(role="replica", mode="manual",
                                      enabled=False)
        self.db.replica_upsert("incoming", "b", api_base.IMAGE, {
            "replica_image_id": api_base.IMAGE2,
            "project_id": api_base.PROJECT,
            "policy_id": self.policy["id"]})

    use_persona = osc_real_api.TestCommandsOnRealApi.use_persona
    run_command = osc_real_api.TestCommandsOnRealApi.run_command

    def failover(self):
        _, out = self.run_command(commands.Failover, [
                                  "gold", "-f", "json"])
        return json.loads(out)

    def changed_since(self, state="pending"):
        """An image created in this cloud since the failover, which the
        reverse policy has to send back.
        """
        reverse = self.db.policy_get(self.policy["id"])["options"][
            "failover"]["reverse_policy_id"]
        self.db.policy_image_upsert(reverse, api_base.IMAGE2, {
            "state": state, "image_name": "new",
            "project_id": api_base.PROJECT})
        return reverse

    def _wait_finishing(self, state="complete", replicated=True):
        """Make the waiting client finish the failback's migrations (as
        the engine would, and mark the image replicated).
        """
        dtn = self.app_.client_manager.dtn
        real_wait = dtn.migrations.wait

        def wait(ids, **kwargs):
            for mid in ids:
                self.db.migration_update(mid, {"state": state})
                if replicated:
                    row = self.db.migration_get(mid)
                    for image in self.db.policy_images_get(
                            migration_id=mid):
                        self.db.policy_image_upsert(
                            image["policy_id"], row["image_id"],
                            {"state": "replicated"})
            return real_wait(ids, **kwargs)
        return mock.patch.object(dtn.migrations, "wait", side_effect=wait)

    def test_failover_by_name_in_the_import_project(self):
        shown = self.failover()
        self.assertEqual((self.policy["id"], "failed-over", "gold-failback",
                          1), (shown["id"], shown["role"],
                               shown["reverse_policy_name"],
                               shown["promoted"]))
        reverse = self.db.policy_get(shown["reverse_policy_id"])
        self.assertEqual(("failback", api_base.PROJECT),
                         (reverse["role"], reverse["project_id"]))
        fields = list(shown)
        self.assertEqual(list(commands.FAILOVER_EXTRA),
                         fields[fields.index("role") + 1:
                                fields.index("role") + 4])
        # Again, by ID: the same reverse policy.
        _, out = self.run_command(commands.Failover,
                                  [self.policy["id"], "-f", "value", "-c",
                                   "reverse_policy_id"])
        self.assertEqual(shown["reverse_policy_id"] + "\n", out)

    def test_failover_errors(self):
        primary = self.add_policy(name="primary")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.Failover, [primary["id"]])
        self.assertIn("fail over", str(exc))
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.Failover, ["silver"])
        self.assertIn("silver", str(exc))
        self.use_persona("member")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.Failover, ["gold"])
        self.assertIn("403", str(exc))

    def test_failback_without_wait_prints_the_migrations(self):
        self.failover()
        reverse = self.changed_since()
        status, out = self.run_command(commands.Failback,
                                       ["gold", "-f", "json"])
        self.assertEqual(0, status)
        shown = json.loads(out)
        self.assertEqual(
            list(commands.FAILBACK_FIELDS), list(shown))
        [migration] = self.db.migration_get_all()
        self.assertEqual(
            (self.policy["id"], "gold", "failed-over", reverse,
             "gold-failback", False, 1, [migration["id"]]),
            tuple(shown[f] for f in commands.FAILBACK_FIELDS))
        _, out = self.run_command(commands.Failback, ["gold"])
        self.assertIn("| complete ", out)
        self.assertIn("False", out)

    def test_failback_wait_until_complete(self):
        self.failover()
        self.changed_since()
        with self._wait_finishing():
            status, out = self.run_command(
                commands.Failback, ["gold", "--wait", "--interval", "0.05",
                                    "-f", "json"])
        self.assertEqual(0, status)
        shown = json.loads(out)
        [migration] = self.db.migration_get_all()
        self.assertEqual((True, "replica", 1, [migration["id"]]),
                         (shown["complete"], shown["role"],
                          shown["migrations"], shown["migration_ids"]))
        self.assertEqual(["failover_policy", "failback_policy",
                          "failback_policy"],
                         [c[0] for c in self.engine.calls
                          if c[0].startswith("fail")])
        # Done: complete at once.
        _, out = self.run_command(commands.Failback,
                                  ["gold", "--wait", "-f", "value", "-c",
                                   "complete"])
        self.assertEqual("True\n", out)

    def test_failback_wait_failed_migration_exits_1(self):
        self.failover()
        self.changed_since()
        with self._wait_finishing(state="failed", replicated=False):
            exc = self.assertRaises(
                exceptions.CommandError, self.run_command,
                commands.Failback, ["gold", "--wait", "--interval", "0.05",
                                    "-f", "value", "-c", "complete"])
        self.assertIn("failed", str(exc))
        self.assertIn("openstack dtn failback gold", str(exc))
        # The answer was printed first.
        self.assertEqual("False\n", self.app_.stdout.getvalue())

    def test_failback_wait_timeout(self):
        self.failover()
        self.changed_since()
        exc = self.assertRaises(
            exceptions.CommandError, self.run_command, commands.Failback,
            ["gold", "--wait", "--interval", "0.05", "--timeout", "0.2"])
        self.assertIn("not finished", str(exc))
        # Nothing to wait for, yet not complete: asks again until the
        # timeout.
        self.db.migration_update(self.db.migration_get_all()[0]["id"],
                                 {"state": "complete"})
        self.changed_since("syncing")
        exc = self.assertRaises(
            exceptions.CommandError, self.run_command, commands.Failback,
            ["gold", "--wait", "--interval", "0.05", "--timeout", "0.2"])
        self.assertIn("not complete after", str(exc))

    def test_failback_errors(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.Failback, ["gold"])
        self.assertIn("fail back", str(exc))
        for argv, words in ((["gold", "--wait", "--interval", "0"],
                             "--interval"),
                            (["gold", "--wait", "--timeout", "-1"],
                             "--timeout"),
                            (["silver"], "silver")):
            exc = self.assertRaises(exceptions.CommandError,
                                    self.run_command, commands.Failback,
                                    argv)
            self.assertIn(words, str(exc))
        self.use_persona("reader")
        self.assertRaises(exceptions.CommandError, self.run_command,
                          commands.Failback, ["gold"])
