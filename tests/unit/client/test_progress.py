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
            line(dict(rec("m1", "running", 0.5, {
                "export": {"done": 2 * GiB, "size": 2 * GiB, "rate": 1},
                "transfer": {"done": GiB, "rate": 50 * MiB},
                "import": {"done": 0}}), eta=20.0)))

    def test_each_unfinished_stage_has_its_rate(self):
        # Pipelined: export and transfer run at once.
        text = line(dict(rec("m1", "running", 0.3, {
            "export": {"done": GiB, "rate": 400 * MiB},
            "transfer": {"done": GiB // 2, "rate": 300 * MiB}}), eta=5.0))
        self.assertIn(" export 50% 400.0 MiB/s transfer 25% 300.0 MiB/s "
                      "ETA 00:05", text)

    def test_eta_is_the_engine_s_over_all_stages(self):
        # Before: a stage's own ETA from its first rate sample (the
        # issue's "ETA 35:12:23") won over the record's.
        stages = {"export": {"done": 0, "size": 100, "rate": 1,
                             "eta": 126743},
                  "transfer": {"done": 50, "size": 100, "rate": 10}}
        text = line(dict(rec("m1", "running", stages=stages), eta=None))
        self.assertNotIn("ETA", text)
        text = line(dict(rec("m1", "running", stages=stages), eta=64.0))
        self.assertTrue(text.endswith(" ETA 01:04"), text)

    def test_smoothed_rate_once_known(self):
        st = {"done": GiB, "rate": 900 * MiB, "avg_rate": 300 * MiB,
              "rate_samples": 5, "rate_seconds": 5.0}
        self.assertIn(" transfer 50% 300.0 MiB/s",
                      line(rec("m1", "running", 0.3, {"transfer": st})))

    def test_peer_not_answering(self):
        text = line(dict(rec("m1", "running", 0.3), eta=None,
                         peer_silent_since="2026-12-02T07:01:02.000000Z"))
        self.assertTrue(text.endswith(
            " - peer not answering since 07:01:02 UTC"), text)

    def test_fits_the_terminal_with_rate_and_eta(self):
        # Before: cut at 80 columns before the rate and the ETA.
        record = dict(rec("m1", "running", 0.42, {
            "export": {"done": 2 * GiB, "state": "complete"},
            "transfer": {"done": GiB, "rate": 310 * MiB},
            "import": {"done": GiB // 2, "rate": 300 * MiB}}), eta=3725.0,
            image_name="a-rather-long-image-name-of-a-real-cloud")
        out = io.StringIO()
        out.isatty = lambda: True
        progress = client_progress.Progress(out)
        for columns in (80, 100, 60):
            with mock.patch.object(client_progress.shutil,
                                   "get_terminal_size",
                                   return_value=(columns, 24)):
                progress.draw([record])
            drawn = out.getvalue().split("\x1b[K")[-1].split("\n")[0]
            self.assertLessEqual(len(drawn), columns - 1, drawn)
            if columns < 80:
                continue        # too narrow: cut
            self.assertTrue(drawn.endswith(
                "transfer 50% 310.0 MiB/s import 25% 300.0 MiB/s "
                "ETA 1:02:05"), (columns, drawn))
        # The whole line where it fits.
        self.assertEqual(line(record), line(record, columns=200))

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
        self.assertEqual("\r\x1b[K%s\n" % line(records[-1], columns=40),
                         first)
        # Redrawn in place; as many lines as fit, unfinished ones first.
        self.assertEqual("\x1b[1A" + "".join(
            "\r\x1b[K%s\n" % text[:39] for text in (
                line(records[4], columns=40), line(records[5], columns=40),
                "6 migrations: 4 complete, 1 queued, 1 running")),
            second)
        self.assertEqual("", rest)
