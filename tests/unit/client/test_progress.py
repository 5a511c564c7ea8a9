"""Progress lines of migrations (dtn-migrate-manage and the demo)."""

import io
from unittest import mock


from dtn_migrate.client import progress as client_progress
from tests.unit.cmd import test_manage
from tests.unit import testcase

GiB = test_manage.GiB
MiB = test_manage.MiB
rec = test_manage.rec
line = client_progress.migration_line


class TestMigrationLine(testcase.TestCase):
    def test_running(self):
        self.assertEqual(
            "name-m1                      running   [##########..........]"
            "  50.0% of 2.0 GiB export 100% transfer 50% 50.0 MiB/s "
            "import 0% ETA 00:20",
            line(rec("m1", "running", 0.5, {
                "export": {"done": 2 * GiB, "size": 2 * GiB, "rate": 1},
                "transfer": {"done": GiB, "rate": 50 * MiB},
                "import": {"done": 0}})))

    def test_each_unfinished_stage_has_its_rate(self):
        # Pipelined: export and transfer run at once.
        text = line(rec("m1", "running", 0.3, {
            "export": {"done": GiB, "rate": 400 * MiB},
            "transfer": {"done": GiB // 2, "rate": 300 * MiB}}))
        self.assertIn(" export 50% 400.0 MiB/s transfer 25% 300.0 MiB/s "
                      "ETA 00:05", text)

    def test_eta_of_the_stage_due_last(self):
        stages = {"export": {"done": 0, "size": 100, "rate": 1,
                             "eta": 4000},
                  "transfer": {"done": 50, "size": 100, "rate": 10}}
        self.assertEqual(4000, client_progress.eta(stages, None))
        self.assertTrue(line(rec("m1", "running", stages=stages)).endswith(
            " export 0% 1 B/s transfer 50% 10 B/s ETA 1:06:40"))
        self.assertIsNone(client_progress.eta({}, 100))

    def test_eta_of_the_row_when_stages_have_no_rate(self):
        record = dict(rec("m1", "running", 0.5, {
            "import": {"done": GiB, "state": "uploading"}}), eta=75.0)
        self.assertTrue(line(record).endswith(" import 50% ETA 01:15"),
                        line(record))
        record["eta"] = None
        self.assertTrue(line(record).endswith(" import 50%"))

    def test_queued_and_final(self):
        text = line(rec("m1", "queued", image_name=None, image_id=None,
                        size=None, reused=True))
        self.assertTrue(text.startswith("m1 "))
        self.assertTrue(text.endswith("   0.0% (reused)"), text)
        text = line(rec("m1", "failed", 0.3,
                        {"transfer": {"done": GiB, "rate": 5}},
                        error="boom\ntraceback"))
        self.assertTrue(text.endswith(" 30.0% of 2.0 GiB transfer 50% - "
                                      "boom"), text)
        text = line(rec("m1", "complete", 1.0, {"import": {"done": None}}))
        self.assertTrue(text.endswith("[####################] 100.0% of "
                                      "2.0 GiB import 100%"), text)

    def test_without_label(self):
        # The demo's line: it follows one migration it named already.
        self.assertEqual(
            "[#####...............]  25.0% of 2.0 GiB export 50%",
            line(rec("m1", "running", 0.25, {"export": {"done": GiB}}),
                 label=False))

    def test_percentages_do_not_go_back(self):
        seen = {}
        line(rec("m1", "running", 0.9, {
            "export": {"done": 2 * GiB, "state": "complete"},
            "import": {"done": GiB, "state": "uploading"}}), seen)
        # The peer's last report: active, no byte count.
        active = rec("m1", "running", 2 / 3, {
            "export": {"done": 2 * GiB, "state": "complete"},
            "import": {"done": None, "state": "active"}})
        self.assertEqual(
            "[##################..]  90.0% of 2.0 GiB export 100% "
            "import 100%", line(active, seen, label=False))
        self.assertEqual({"total": 90.0, "export": 100.0, "import": 100.0},
                         seen)
        # Without memory: the record as it is, stage state included.
        self.assertIn(" 66.7% of 2.0 GiB export 100% import 100%",
                      line(active))
        # A stage without a size keeps what it showed.
        self.assertIn(" import 100%", line(
            rec("m1", "running", 0.5, {"import": {"done": 5}}, size=None),
            seen))

    def test_duration(self):
        self.assertEqual(["00:00", "01:05", "59:59", "1:00:00"],
                         [client_progress.duration(s)
                          for s in (0, 65.9, 3599, 3600)])


class TestProgress(testcase.TestCase):
    def test_log_stream(self):
        out = io.StringIO()
        progress = client_progress.Progress(out)
        for p in (0.0, 0.05, 0.12, 0.15, 0.08):
            progress.draw([rec("m1", "running", p), rec("m2", "queued")])
        progress.draw([rec("m1", "complete", 1.0), rec("m2", "queued")])
        # A line when a migration's state or tenth changes (never back).
        self.assertEqual([("name-m1", "running", "0.0%"),
                          ("name-m2", "queued", "0.0%"),
                          ("name-m1", "running", "12.0%"),
                          ("name-m1", "complete", "100.0%")],
                         [tuple(text.split()[i] for i in (0, 1, 3))
                          for text in out.getvalue().splitlines()])

    def test_log_stream_without_label(self):
        out = io.StringIO()
        progress = client_progress.Progress(out, label=False)
        for state, p in (("queued", 0), ("running", 0.3),
                         ("running", 0.35), ("complete", 1.0)):
            progress.draw([rec("m1", state, p)])
        self.assertEqual(["[....................]   0.0% of 2.0 GiB",
                          "[######..............]  30.0% of 2.0 GiB",
                          "[####################] 100.0% of 2.0 GiB"],
                         out.getvalue().splitlines())

    def test_terminal(self):
        out = io.StringIO()
        out.isatty = lambda: True
        progress = client_progress.Progress(out)
        records = [rec("m%d" % i, "complete", 1.0) for i in range(4)] + \
            [rec("m4", "queued"), rec("m9", "running", 0.5)]
        with mock.patch.object(client_progress.shutil, "get_terminal_size",
                               return_value=(40, 5)):
            progress.draw(records[-1:])
            progress.draw(records)
        first, second, rest = out.getvalue().split("\x1b[J")
        self.assertEqual("\r\x1b[K%s\n" % line(records[-1])[:39], first)
        # Redrawn in place; as many lines as fit, unfinished ones first.
        self.assertEqual("\x1b[1A" + "".join(
            "\r\x1b[K%s\n" % text[:39] for text in (
                line(records[4]), line(records[5]),
                "6 migrations: 4 complete, 1 queued, 1 running")),
            second)
        self.assertEqual("", rest)
