"""The openstack dtn command classes against the real dtn-migrate-api
application (noauth2, SQLite, the API tests' fake engine) over HTTP.
"""

import io
import json
import types

from osc_lib import exceptions

from dtn_migrate.osc.v1 import migrations
from dtn_migrate.osc.v1 import peers
from tests.unit.api import base as api_base
from tests.unit.client import test_real_api
from tests.unit.osc import base


class TestCommandsOnRealApi(test_real_api.RealApiTestCase):

    def setUp(self):
        super().setUp()
        self.use_persona("member")

    def use_persona(self, persona):
        self.app_ = types.SimpleNamespace(
            stdout=base.Stream(), stderr=base.Stream(), stdin=io.StringIO(),
            options=types.SimpleNamespace(debug=False),
            client_manager=types.SimpleNamespace(
                dtn=self.dtn(persona),
                image=base.FakeImages({"cirros": api_base.IMAGE})))

    def run_command(self, cls, argv):
        self.app_.stdout.seek(0)
        self.app_.stdout.truncate()
        cmd = cls(self.app_, None)
        parsed = cmd.get_parser("openstack dtn").parse_args(argv)
        return cmd.run(parsed), self.app_.stdout.getvalue()

    def test_migrate_by_name_then_list_and_show(self):
        _, out = self.run_command(migrations.Migrate, [
            "cirros", "--peer", "b", "--visibility", "private",
            "-f", "json"])
        created = json.loads(out)
        self.assertEqual([(api_base.IMAGE, "queued")],
                         [(r["Image ID"], r["State"]) for r in created])
        _, out = self.run_command(migrations.ListMigration,
                                  ["--long", "-f", "json"])
        listed = json.loads(out)
        self.assertEqual([created[0]["ID"]], [r["ID"] for r in listed])
        self.assertEqual({"export": 0, "transfer": 0, "import": 0},
                         listed[0]["Bytes"])
        _, out = self.run_command(migrations.ShowMigration,
                                  [created[0]["ID"], "-f", "json"])
        shown = json.loads(out)
        self.assertEqual(set(migrations.SHOW_FIELDS), set(shown))
        self.assertTrue(shown["created_at"].endswith("Z"))
        self.assertEqual(["queued"], [e["event"] for e in shown["events"]])

    def test_wait_reports_failure(self):
        row = self.add(state="running", stage="transfer", size=100,
                       progress=0.5, bytes_export=100, bytes_transfer=50)
        self.db.migration_update(row["id"], {
            "state": "failed", "error": "ImportNotAllowed: visibility "
            "public is not allowed for peer a"})
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.WaitMigration,
                                [row["id"], "--interval", "0.01"])
        self.assertIn("failed: ImportNotAllowed: visibility public",
                      str(exc))

    def test_cancel_of_a_finished_migration_exits_nonzero(self):
        row = self.add(state="complete")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.CancelMigration, [row["id"]])
        self.assertEqual("Migration %s is already complete: cannot cancel "
                         "it. (HTTP 409)" % row["id"], str(exc))

    def test_long_names_through_the_api(self):
        # What the CLI does not check itself, the API says as briefly.
        long = "n" * 5000
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.ShowMigration, [long])
        self.assertEqual("Migration %s…(5000 characters) could not be "
                         "found. (HTTP 404)" % long[:64], str(exc))
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                peers.ShowPeer, [long])
        self.assertEqual("Unknown peer DTN '%s'…(5000 characters). "
                         "(HTTP 404)" % long[:64], str(exc))

    def test_reader_cannot_cancel(self):
        row = self.add()
        self.use_persona("reader")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.CancelMigration, [row["id"]])
        self.assertIn("(HTTP 403)", str(exc))
        self.use_persona("other")
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                migrations.CancelMigration, [row["id"]])
        self.assertIn("(HTTP 404)", str(exc))

    def test_peer_list_value(self):
        _, out = self.run_command(peers.ListPeer,
                                  ["-f", "value", "-c", "Name",
                                   "-c", "Reachable"])
        self.assertEqual(["b True", "c False"], out.splitlines())

    def test_peers_for_each_persona(self):
        # A reader sees reachability and RTT; the address, port and the
        # probe's error are an administrator's (dtn:peer:show:details).
        for persona, columns in (
                ("reader", ["Name", "Reachable", "RTT (ms)",
                            "Last Throughput", "Last Transfer At",
                            "Checked At"]),
                ("admin", [heading for _, heading in peers.COLUMNS])):
            self.use_persona(persona)
            _, out = self.run_command(peers.ListPeer, ["-f", "json"])
            rows = json.loads(out)
            self.assertEqual(columns, list(rows[0]), persona)
            _, out = self.run_command(peers.ListPeer, [])
            self.assertIn("| c ", out)
            self.assertEqual(persona == "admin",
                             "connection refused" in out)
            _, out = self.run_command(peers.ShowPeer, ["c", "-f", "json"])
            shown = json.loads(out)
            self.assertFalse(shown["reachable"])
            self.assertEqual(persona == "admin", "address" in shown)
