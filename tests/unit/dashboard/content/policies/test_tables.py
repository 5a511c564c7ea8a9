"""The policies table, its status and row actions."""

from dtn_migrate.dashboard.content.policies import tables
from dtn_migrate.dashboard.content.policies import views
from tests.unit.dashboard import base


class PoliciesTableTest(base.TestCase):

    def table(self, data=None):
        req = self.factory.get("/project/dtn_policies/")
        req.session = {}
        return tables.PoliciesTable(req, data=data or base.policies())

    def test_meta(self):
        table = self.table()
        self.assertEqual("policies", table.name)
        self.assertEqual(["rpo_state"], table._meta.status_columns)
        self.assertTrue(table._meta.row_class.ajax)
        self.assertEqual(
            ["multi_select", "name", "peer", "mode", "rpo_target",
             "rpo_state", "rpo_age", "replicated", "pending", "failed",
             "enabled", "actions"], list(table.columns))

    def test_cells(self):
        table = self.table()
        rows = {row.datum.id: row for row in table.get_rows()}
        cells = rows["p-bad"].cells
        self.assertEqual(60, cells["rpo_target"].data)
        self.assertEqual("Breached", cells["rpo_state"].data)
        self.assertEqual("1h 30m", cells["rpo_age"].data)
        self.assertEqual(1, cells["pending"].data)
        self.assertEqual(1, cells["failed"].data)
        self.assertEqual("Yes", cells["enabled"].data)
        self.assertEqual("Not computed",
                         str(rows["p-rep"].cells["rpo_state"].value))
        self.assertEqual("No", rows["p-rep"].cells["enabled"].data)
        self.assertEqual(2, rows["p-ok"].cells["replicated"].data)

    def test_status(self):
        rows = {row.datum.id: row for row in self.table().get_rows()}
        self.assertTrue(rows["p-ok"].status)
        self.assertFalse(rows["p-bad"].status)
        self.assertIsNone(rows["p-rep"].status)
        for state, expected in tables.RPO_STATUS_CHOICES:
            one = self.table([base.policy(
                "p-ok", rpo={"state": state, "target_minutes": 30})])
            self.assertEqual(expected, one.get_rows()[0].status)

    def test_waiting_images_keep_the_row_updating(self):
        syncing = base.policy("p-ok", images={"syncing": 1,
                                              "replicated": 1})
        row = self.table([syncing]).get_rows()[0]
        self.assertIsNone(row.status)
        self.assertEqual("warning", row.status_class)
        self.assertEqual(1, row.cells["pending"].data)

    def test_row_actions(self):
        table = self.table()
        data = {p.id: p for p in table.data}
        names = lambda pid: [a.name for a in  # noqa: E731
                             table.get_row_actions(data[pid])]
        self.assertEqual(["sync", "delete"], names("p-ok"))
        self.assertEqual(["drill", "delete"], names("p-rep"))


class DetailFieldsTest(base.TestCase):

    def test_fields(self):
        fields = {k: v for k, _l, v in
                  views.detail_fields(base.policy("p-bad"))}
        self.assertEqual('properties={"tier": "silver"}',
                         fields["selector"])
        self.assertEqual("Continuous", fields["mode"])
        self.assertEqual("1h 30m", fields["rpo_seconds"])
        self.assertEqual("-", fields["schedule"])
        self.assertEqual("peer unreachable", fields["last_error"])
        self.assertIn("1 Failed", fields["images"])
        self.assertEqual("2026-11-25 06:00:00", fields["rpo_checked_at"])
        rep = {k: v for k, _l, v in
               views.detail_fields(base.policy("p-rep"))}
        self.assertEqual("-", rep["rpo_state"])
        self.assertEqual("No", rep["enabled"])

    def test_drill_cells(self):
        running, passed = base.drills()
        self.assertEqual("-", tables.drill_images(running))
        self.assertEqual("2 / 0", tables.drill_images(passed))
        self.assertEqual("1m 15s", tables.drill_rto(passed))
        self.assertEqual("-", tables.drill_rto(running))
        self.assertEqual("2026-11-25 06:10:00",
                         tables.drill_started(running))
