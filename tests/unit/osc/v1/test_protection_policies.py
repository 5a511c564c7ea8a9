"""openstack dtn policy ... and replica list against the real API
(noauth2, SQLite, the API tests' fake engine) over HTTP.
"""

import json
import uuid

from osc_lib import exceptions

from dtn_migrate.osc.v1 import protection_policies as commands
from dtn_migrate.osc.v1 import replicas
from tests.unit.api import base as api_base
from tests.unit.client import test_real_api
from tests.unit.osc.v1 import test_real_api as osc_real_api


class TestPolicyCommands(test_real_api.RealApiTestCase):

    def setUp(self):
        super().setUp()
        self.use_persona("member")

    use_persona = osc_real_api.TestCommandsOnRealApi.use_persona
    run_command = osc_real_api.TestCommandsOnRealApi.run_command

    def create(self, *argv):
        _, out = self.run_command(commands.CreatePolicy, list(argv) + [
            "-f", "json"])
        return json.loads(out)

    def test_create_show_list(self):
        # The replicas' ids and project are an administrator's to ask.
        exc = self.assertRaises(
            exceptions.CommandError, self.create, "gold", "--peer", "b",
            "--tag", "gold", "--target-project", "p2")
        self.assertIn("options.target_project", str(exc))
        self.assertIn("(HTTP 403)", str(exc))
        self.use_persona("admin")
        created = self.create(
            "gold", "--peer", "b", "--tag", "gold", "--tag", "db",
            "--property", "os=linux", "--visibility", "private",
            "--name-pattern", "db-*", "--mode", "scheduled",
            "--schedule", "0 2 * * *", "--rpo", "90", "--keep-id",
            "--target-project", "p2", "--deletion", "mirror",
            "--deletion-grace", "0", "--description", "nightly")
        self.assertEqual({"tags": ["gold", "db"],
                          "properties": {"os": "linux"},
                          "visibility": ["private"], "name_pattern": "db-*",
                          "projects": []}, created["selector"])
        self.assertEqual({"keep_id": True, "target_project": "p2",
                          "deletion": "mirror",
                          "deletion_grace_minutes": 0}, created["options"])
        self.assertEqual((90, None, 0),
                         (created["rpo_target_minutes"],
                          created["rpo_state"], created["images_pending"]))
        _, out = self.run_command(commands.ShowPolicy, ["gold", "-f",
                                                        "json"])
        self.assertEqual(created["id"], json.loads(out)["id"])
        _, out = self.run_command(
            commands.ListPolicy, ["-f", "json"])
        [row] = json.loads(out)
        self.assertEqual(["ID", "Name", "Peer", "Mode", "RPO Target (min)",
                          "RPO State", "RPO (s)", "Replicated", "Pending",
                          "Enabled"], list(row))
        self.assertEqual(("gold", 90, True),
                         (row["Name"], row["RPO Target (min)"],
                          row["Enabled"]))
        _, out = self.run_command(commands.ListPolicy, ["--long"])
        self.assertIn('tags=["gold", "db"]', out)

    def test_create_needs_a_selector(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.CreatePolicy,
                                ["gold", "--peer", "b"])
        self.assertIn("--tag", str(exc))
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.CreatePolicy,
                                ["gold", "--peer", "b", "--tag", "x",
                                 "--rpo", "0"])
        self.assertIn("--rpo", str(exc))
        # The API's own message for what only it checks.
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.CreatePolicy,
                                ["gold", "--peer", "b", "--tag", "x",
                                 "--mode", "scheduled"])
        self.assertIn("schedule is required", str(exc))

    def test_set(self):
        created = self.create("gold", "--peer", "b", "--tag", "gold",
                              "--property", "os=linux")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.SetPolicy, ["gold", "--keep-id"])
        self.assertIn("options.keep_id true", str(exc))
        # The member's policy, kept ids set by an administrator.
        self.use_persona("admin")
        self.run_command(commands.SetPolicy,
                         [created["id"], "--keep-id"])
        self.use_persona("member")
        _, out = self.run_command(commands.SetPolicy, [
            "gold", "--tag", "new", "--no-property", "--disable",
            "--deletion", "mirror", "--name", "silver", "-f", "json"])
        shown = json.loads(out)
        self.assertEqual(("silver", False), (shown["name"],
                                             shown["enabled"]))
        self.assertEqual(["new"], shown["selector"]["tags"])
        self.assertEqual({}, shown["selector"]["properties"])
        self.assertEqual((True, "mirror"),
                         (shown["options"]["keep_id"],
                          shown["options"]["deletion"]))
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.SetPolicy, ["silver"])
        self.assertIn("Nothing to change", str(exc))
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.SetPolicy, ["silver", "--no-tag"])
        self.assertIn("at least one of", str(exc))

    def test_sync_images_delete(self):
        created = self.create("gold", "--peer", "b", "--tag", "gold")
        _, out = self.run_command(commands.SyncPolicy, ["gold", "-f",
                                                        "json"])
        [migration] = json.loads(out)
        self.assertEqual((api_base.IMAGE, "queued"),
                         (migration["Image ID"], migration["State"]))
        _, out = self.run_command(commands.ListPolicyImage,
                                  ["gold", "-f", "json"])
        self.assertEqual([(api_base.IMAGE, "syncing")],
                         [(r["Image ID"], r["State"])
                          for r in json.loads(out)])
        _, out = self.run_command(commands.ListPolicyImage,
                                  ["gold", "--state", "failed"])
        self.assertEqual("", out.strip())
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                commands.DeletePolicy,
                                [created["id"], "nope"])
        self.assertIn("1 of 2", str(exc))
        self.assertIn("nope", str(exc))
        self.assertRaises(exceptions.CommandError, self.run_command,
                          commands.ShowPolicy, ["gold"])

    def test_replica_list(self):
        created = self.create("gold", "--peer", "b", "--tag", "gold")
        self.db.replica_upsert("outgoing", "b", api_base.IMAGE, {
            "project_id": api_base.PROJECT, "policy_id": created["id"],
            "replica_image_id": str(uuid.UUID(int=5))})
        self.db.replica_upsert("incoming", "c", api_base.IMAGE2, {
            "project_id": api_base.PROJECT})
        _, out = self.run_command(replicas.ListReplica, ["-f", "json"])
        self.assertEqual(2, len(json.loads(out)))
        _, out = self.run_command(replicas.ListReplica,
                                  ["--policy", "gold", "-f", "json"])
        [row] = json.loads(out)
        self.assertEqual(("outgoing", api_base.IMAGE, created["id"]),
                         (row["Direction"], row["Source Image ID"],
                          row["Policy ID"]))
        _, out = self.run_command(replicas.ListReplica,
                                  ["--direction", "incoming", "-f", "json"])
        self.assertEqual(["c"], [r["Peer"] for r in json.loads(out)])
        self.assertRaises(exceptions.CommandError, self.run_command,
                          replicas.ListReplica, ["--all-projects"])
