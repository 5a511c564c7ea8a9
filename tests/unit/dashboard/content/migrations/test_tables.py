"""The migrations table, its progress cell and the detail tables."""

import re

from dtn_migrate.dashboard.content.admin_migrations import \
    tables as admin_tables
from dtn_migrate.dashboard.content.migrations import stages
from dtn_migrate.dashboard.content.migrations import tables
from tests.unit.dashboard import base


class MigrationsTableTest(base.TestCase):

    def table(self, data=None):
        req = self.factory.get("/project/dtn_migrations/")
        req.session = {}
        return tables.MigrationsTable(req, data=data or base.migrations())

    def test_meta(self):
        table = self.table()
        self.assertEqual("migrations", table.name)
        self.assertEqual(["state"], table._meta.status_columns)
        self.assertTrue(table._meta.row_class.ajax)
        self.assertEqual(
            ["multi_select", "image", "peer", "state", "stage", "progress",
             "reason", "created", "actions"], list(table.columns))
        self.assertEqual("server", table._meta._filter_action.filter_type)
        self.assertEqual(["state", "peer"],
                         [c[0] for c in table._meta._filter_action
                          .filter_choices])

    def test_status(self):
        table = self.table()
        rows = {row.datum.id: row for row in table.get_rows()}
        self.assertEqual("migrations__row__m-run", rows["m-run"].id)
        self.assertIsNone(rows["m-run"].status)
        self.assertTrue(rows["m-done"].status)
        self.assertFalse(rows["m-fail"].status)
        for state, expected in tables.STATUS_CHOICES:
            one = self.table([base.migration("m-run", state=state)])
            self.assertEqual(expected, one.get_rows()[0].status)

    def test_row_actions(self):
        table = self.table()
        data = {m.id: m for m in table.data}
        names = lambda mid: [a.name for a in  # noqa: E731
                             table.get_row_actions(data[mid])]
        self.assertEqual(["cancel"], names("m-run"))
        self.assertEqual([], names("m-done"))
        self.assertEqual(["retry"], names("m-fail"))

    def test_no_retry_of_incoming(self):
        migration = base.migration("m-fail", direction="incoming")
        table = self.table([migration])
        self.assertEqual([], table.get_row_actions(migration))

    def test_progress_cell(self):
        html = tables.progress_cell(base.migration("m-run"))
        self.assertIn('class="progress-bar', html)
        self.assertEqual(["42.4"], re.findall(r'data-progress="([^"]+)"',
                                              html))
        # The bytes each stage moved (before: progress times size, as if
        # 4.2 MiB had been moved in all).
        self.assertIn("export 10.0 MiB</span>, <span class=\"dtn-stage-bytes"
                      "\" data-stage=\"transfer\">transfer 4.2 MiB</span> / "
                      "10.0 MiB", html)
        self.assertNotIn("import", html)
        self.assertNotIn("dtn-peer-silent", html)
        silent = tables.progress_cell(base.migration(
            "m-run", peer_silent_since="2026-11-25T06:00:03.000000Z"))
        self.assertIn("Peer not answering since 2026-11-25 06:00:03 UTC",
                      silent)
        self.assertIn("8.0 MiB/s", html)
        self.assertIn("ETA 1m 15s", html)
        no_rate = tables.progress_cell(base.migration("m-run", rate=None))
        self.assertNotIn("dtn-rate", no_rate)

    def test_progress_cell_complete_and_unknown_size(self):
        done = tables.progress_cell(base.migration("m-done",
                                                   progress=0.99))
        self.assertIn('data-progress="100.0"', done)
        self.assertNotIn("ETA", done)
        failed = tables.progress_cell(base.migration("m-fail"))
        self.assertIn('data-progress="10.0"', failed)
        self.assertIn("progress-bar-danger", failed)
        self.assertNotIn("dtn-bytes", failed)

    def cells(self, migration, table_class=tables.MigrationsTable):
        req = self.factory.get("/project/dtn_migrations/")
        req.session = {}
        [row] = table_class(req, data=[migration]).get_rows()
        return {name: str(cell.value) for name, cell in row.cells.items()}

    def attrs(self, migration, column):
        req = self.factory.get("/project/dtn_migrations/")
        req.session = {}
        [row] = tables.MigrationsTable(req, data=[migration]).get_rows()
        return row.cells[column].get_final_attrs()

    def test_failure_reason_is_shown(self):
        cells = self.cells(base.migration("m-fail"))
        self.assertIn("peer unreachable", cells["reason"])
        self.assertIn('title="peer unreachable"', cells["reason"])
        self.assertEqual("-", self.cells(base.migration("m-done"))["reason"])
        # A running migration's old error (of an attempt before) is not
        # a failure reason.
        running = base.migration("m-run", error="earlier attempt")
        self.assertEqual("-", self.cells(running)["reason"])

    def test_long_failure_reason_is_shortened_once(self):
        error = "x" * 5000
        cell = self.cells(base.migration("m-fail", error=error))["reason"]
        self.assertIn("…(5000 characters)", cell)
        # The whole text in the title only, not twice.
        self.assertEqual(1, cell.count(error))
        self.assertIn('title="%s"' % error, cell)

    def test_stage_of_a_failure_is_the_stage_that_failed(self):
        # The import refused the image while the transfer ran: the
        # record's stage says transfer, the events say import.
        failed = base.migration("m-fail", stage="transfer", events=[
            {"stage": "transfer", "event": "started", "message": None,
             "bytes": 0, "created_at": "2026-11-25T04:00:01.000000Z"},
            {"stage": "import", "event": "failed",
             "message": "project not allowed", "bytes": None,
             "created_at": "2026-11-25T04:00:30.000000Z"},
            {"stage": None, "event": "failed", "message": "failed",
             "bytes": None, "created_at": "2026-11-25T04:00:31.000000Z"}])
        self.assertEqual("Import (failed)", self.cells(failed)["stage"])
        # Without events (a list's row), the record's stage.
        self.assertEqual("Transfer (failed)",
                         self.cells(base.migration("m-fail"))["stage"])
        self.assertEqual("Transfer",
                         self.cells(base.migration("m-run"))["stage"])
        self.assertEqual("-", self.cells(base.migration(
            "m-done", stage=None))["stage"])

    def test_a_refusal_before_the_first_byte_is_a_preflight_failure(self):
        self.assertEqual("Preflight (failed)", self.cells(base.migration(
            "m-fail", stage="preflight"))["stage"])

    def test_long_names_are_cut_with_their_title(self):
        peer, name = "p" * 200, "n" * 255
        cells = self.cells(base.migration("m-run", peer=peer,
                                          image_name=name))
        self.assertIn('class="dtn-ellipsis dtn-peer"', cells["peer"])
        self.assertIn('title="%s"' % peer, cells["peer"])
        # The image links to its detail page: the link is cut, the cell
        # has the title.
        self.assertIn('class="dtn-ellipsis"', cells["image"])
        self.assertEqual(name, self.attrs(base.migration(
            "m-run", image_name=name), "image")["title"])

    def test_admin_direction_and_import_project(self):
        incoming = base.migration("m-done", direction="incoming",
                                  project_id=None)
        cells = self.cells(incoming, admin_tables.AdminMigrationsTable)
        self.assertEqual("Incoming", cells["direction"])
        self.assertEqual("Service project (import)", cells["project"])
        incoming.import_project = "demo"
        cells = self.cells(incoming, admin_tables.AdminMigrationsTable)
        self.assertEqual("demo (imported into)", cells["project"])
        cells = self.cells(base.migration("m-run"),
                           admin_tables.AdminMigrationsTable)
        self.assertEqual("Outgoing", cells["direction"])
        self.assertEqual("1", cells["project"])

    def test_image_falls_back_to_id(self):
        self.assertEqual("img-3",
                         tables.image_label(base.migration("m-fail")))

    def test_admin_table(self):
        req = self.factory.get("/admin/dtn_migrations/")
        table = admin_tables.AdminMigrationsTable(req,
                                                  data=base.migrations())
        self.assertEqual("migrations", table.name)
        self.assertEqual(
            ["multi_select", "project", "direction", "image", "peer",
             "state", "stage", "progress", "reason", "created", "actions"],
            list(table.columns))
        self.assertNotIn("migrate", [a.name for a in
                                     table.get_table_actions()])


class StagesTest(base.TestCase):

    def test_timeline(self):
        rows = stages.timeline(base.migration("m-done"))
        export, transfer, imp = rows
        self.assertEqual("2026-11-25T05:00:01.000000Z", export.started)
        self.assertEqual(10.0, export.duration)
        self.assertEqual("finished", transfer.outcome)
        self.assertEqual(2048, transfer.bytes)
        self.assertIsNone(imp.duration)

    def test_timeline_shows_the_latest_attempt(self):
        # Attempt 1 exported, then failed in transfer; it was retried,
        # and attempt 2 has started its export only.
        ev = [("export", "started", "05:00:01"),
              ("export", "finished", "05:00:05"),
              ("transfer", "started", "05:00:02"),
              ("transfer", "failed", "05:00:06"),
              (None, "retried", "05:01:00"),
              ("export", "started", "05:01:02")]
        migration = base.migration("m-done", state="running", events=[
            {"stage": stage, "event": kind, "message": None, "bytes": None,
             "created_at": "2026-11-25T%s.000000Z" % at}
            for stage, kind, at in ev])
        export, transfer, imp = stages.timeline(migration)
        self.assertEqual("2026-11-25T05:01:02.000000Z", export.started)
        self.assertIsNone(export.finished)
        self.assertIsNone(export.outcome)
        self.assertIsNone(transfer.started)
        self.assertIsNone(transfer.outcome)
        self.assertIsNone(imp.started)
        # The events table still lists every attempt's events.
        self.assertEqual(6, len(stages.events(migration)))

    def test_events(self):
        events = stages.events(base.migration("m-done"))
        self.assertEqual(["1", "2", "3", "4", "5", "6"],
                         [e.id for e in events])
        self.assertEqual("verified", events[-1].message)

    def test_tables_render(self):
        req = self.factory.get("/")
        migration = base.migration("m-done")
        html = stages.StagesTable(req, data=stages.timeline(migration)) \
            .render()
        self.assertIn('id="stages"', html)
        self.assertIn("10s", html)
        self.assertIn("2.0 KiB", html)
        html = stages.EventsTable(req, data=stages.events(migration)) \
            .render()
        self.assertIn('id="events"', html)
        self.assertIn("2026-11-25 05:01:00", html)
