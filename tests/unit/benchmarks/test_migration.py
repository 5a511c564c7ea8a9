"""benchmarks.migration: warm-up, targets, the floor of a migration,
the clouds' settings, tidying between runs, memory, the page cost, and
results that outlive their figures."""

import argparse
import datetime
import json
import os
import shutil
import tempfile
from unittest import mock

from benchmarks import _clouds
from benchmarks import migration
from benchmarks import report
from dtn_migrate.conf import engine as engine_opts
from tests.unit.benchmarks import no_matplotlib
from tests.unit import testcase


class MigrationWarmUpTest(testcase.TestCase):
    """benchmarks.migration --warmup: every mode runs first on the new
    clouds, and those runs stay out of the samples the results use.
    """

    def run_bench(self, warmup):
        bench = migration.Bench(argparse.Namespace(
            warmup=warmup, repeat=2,
            modes=["pipelined", "glance-download"]))
        bench.source = {"size": 1 << 30}
        runs = []

        def run_mode(mode):
            runs.append(mode)
            return [(mode, float(len(runs)), {})]
        with mock.patch.object(bench, "run_mode", run_mode), \
                mock.patch.object(bench, "tidy"), \
                mock.patch.object(bench, "save"), \
                mock.patch.object(bench, "log"):
            bench.run()
        return bench, runs

    def test_warm_up_runs_are_kept_apart(self):
        bench, runs = self.run_bench(1)
        self.assertEqual(["pipelined", "glance-download",      # warm-up
                          "pipelined", "glance-download",      # rep 0
                          "glance-download", "pipelined"], runs)
        self.assertEqual([(-1, "pipelined", 1.0),
                          (-1, "glance-download", 2.0)],
                         [(s["rep"], s["what"], s["seconds"])
                          for s in bench.warmup_samples])
        self.assertEqual([3.0, 6.0], bench.seconds("pipelined"))
        self.assertEqual([4.0, 5.0], bench.seconds("glance-download"))

    def test_none_asked_for(self):
        bench, runs = self.run_bench(0)
        self.assertEqual(4, len(runs))
        self.assertEqual([], bench.warmup_samples)
        self.assertEqual([1.0, 4.0], bench.seconds("pipelined"))


class MigrationTargetsTest(testcase.TestCase):
    """Issue 13's targets of a whole migration, repetition by
    repetition.
    """

    def test_migration_targets_are_read_repetition_by_repetition(self):
        bench = migration.Bench(argparse.Namespace())
        bench.source = {"size": 4 << 30}
        bench.settings = {"repeat": 3}
        cpu = {"engine-a": 2.8, "agent-a": 3.0, "engine-b": 2.6}
        for rep, (pipelined, glance, agent_b) in enumerate([
                (36.9, 74.2, 10.0), (37.0, 74.3, 10.0), (37.1, 72.1, 11.0)]):
            for what, seconds in (("pipelined", pipelined),
                                  ("glance-download", glance),
                                  ("export", 3.6), ("transfer", 36.1),
                                  ("import", 32.0)):
                extra = {"cpu_seconds": dict(cpu, **{"agent-b": agent_b})} \
                    if what == "pipelined" else {}
                bench.samples.append({"what": what, "rep": rep,
                                      "seconds": seconds, "extra": extra})
        ratios = bench.ratios(bench.summary())
        _, rows = bench.targets_table(ratios)
        got = {row[0].split()[0]: row[1:] for row in rows}
        self.assertEqual(["1.02 (1.02–1.03)", "met, 3 of 3 repetitions"],
                         got["pipelined"])
        self.assertEqual(["2.01 (1.94–2.01)",
                          "met by the median only, 2 of 3 repetitions"],
                         got["glance-download"])
        self.assertEqual(["4.60 (4.60–4.85)", "met, 3 of 3 repetitions"],
                         got["engines"])

    def test_a_migration_ratio_is_the_ratio_of_the_medians(self):
        # As results.rst gives it; the repetitions' own ratios give the
        # range and the count (their median, 2.06, is not the value).
        bench = migration.Bench(argparse.Namespace())
        bench.source = {"size": 4 << 30}
        bench.settings = {"repeat": 3}
        for rep, (pipelined, glance) in enumerate([
                (36.0, 74.0), (37.0, 72.0), (40.0, 90.0)]):
            for what, seconds in (("pipelined", pipelined),
                                  ("glance-download", glance)):
                bench.samples.append({"what": what, "rep": rep,
                                      "seconds": seconds, "extra": {}})
        _, rows = bench.targets_table(bench.ratios(bench.summary()))
        got = {row[0].split()[0]: row[1:] for row in rows}
        self.assertEqual(["2.00 (1.95–2.25)",
                          "met by the median only, 2 of 3 repetitions"],
                         got["glance-download"])

    def test_each_agent_s_peak_memory(self):
        bench = migration.Bench(argparse.Namespace())
        bench.source = {"size": 4 << 30}
        bench.settings = {"repeat": 2}
        for rep, (a, b) in enumerate([(120, 250), (130, 310)]):
            bench.samples.append({"what": "pipelined", "rep": rep,
                                  "seconds": 37.0, "extra": {
                                      "peak_rss_bytes": {
                                          "agent-a": a << 20,
                                          "agent-b": b << 20,
                                          "engine-a": 900 << 20}}})
        _, rows = bench.targets_table(bench.ratios(bench.summary()))
        [row] = [r for r in rows if "RSS" in r[0]]
        self.assertEqual(["each agent's peak RSS ≤ 300 MiB (pipelined, "
                          "MiB)", "280.00 (250.00–310.00)",
                          "met by the median only, 1 of 2 repetitions"],
                         row)
        # Runs from before it was measured have no such row.
        for s in bench.samples:
            del s["extra"]["peak_rss_bytes"]
        _, rows = bench.targets_table(bench.ratios(bench.summary()))
        self.assertFalse([r for r in rows if "RSS" in r[0]])


class MigrationFloorTest(testcase.TestCase):
    """benchmarks.migration: the image's time on the link as TCP
    payload, and the timeline from the record's stage events.
    """

    def bench(self, **settings):
        bench = migration.Bench(argparse.Namespace())
        bench.source = {"size": 4 << 30}
        bench.settings = dict({"repeat": 2}, **settings)
        return bench

    def test_payload_share_of_a_full_segment(self):
        # 1448 bytes of payload in a 1514-byte frame; 8948 in 9014.
        self.assertAlmostEqual(1448 / 1514, migration.payload_share(1500))
        self.assertAlmostEqual(8948 / 9014, migration.payload_share(9000))

    def test_the_migrations_against_the_payload_time(self):
        bench = self.bench(rate="1gbit", mtu=1500)
        for rep, (pipelined, glance) in enumerate([(36.8, 72.0),
                                                   (37.2, 74.0)]):
            for what, seconds in (("pipelined", pipelined),
                                  ("glance-download", glance)):
                bench.samples.append({"what": what, "rep": rep,
                                      "seconds": seconds, "extra": {}})
        # 4 GiB at 125 MB/s is 34.36 s on the line, 35.93 s as payload.
        self.assertAlmostEqual(35.926, bench.payload_seconds(), places=3)
        ratios = bench.ratios(bench.summary())
        got = ratios["pipelined/payload"]
        self.assertAlmostEqual(37.0 / 35.926, got["median"], places=3)
        self.assertEqual([1.024, 1.035],
                         [round(v, 3) for v in got["per_rep"]])
        self.assertAlmostEqual(73.0 / 35.926,
                               ratios["glance-download/payload"]["median"],
                               places=3)

    def test_no_rate_no_payload_time(self):
        self.assertIsNone(self.bench(rate=None, mtu=1500).payload_seconds())

    def test_the_timeline_is_the_first_event_of_each_stage(self):
        t0 = datetime.datetime(2026, 11, 30, 8, 56, 59, 500000,
                               tzinfo=datetime.timezone.utc).timestamp()
        day = "2026-11-30T08:5"
        events = [dict(zip(("stage", "event", "created_at"), e)) for e in (
            (None, "queued", day + "6:59.510000"),
            ("export", "started", day + "6:59.750000"),
            ("transfer", "started", day + "7:00.000000"),
            ("export", "finished", day + "7:03.250000"),
            ("import", "started", day + "7:00.500000"),
            # A second run of the stage (a retry) is not the first.
            ("transfer", "started", day + "7:10.000000"),
            ("transfer", "finished", day + "7:36.000000"),
            ("import", "finished", None),
            ("bogus", "started", day + "7:00.000000"))]
        got = migration.engine_timeline(events, t0)
        self.assertEqual({"export started": 0.25, "export finished": 3.75,
                          "transfer started": 0.5,
                          "transfer finished": 36.5,
                          "import started": 1.0},
                         {k: round(v, 3) for k, v in got.items()})

    def test_the_table_takes_the_events_when_the_runs_have_them(self):
        bench = self.bench()
        for rep in range(2):
            bench.samples.append({"what": "pipelined", "rep": rep,
                                  "seconds": 37.0 + rep, "extra": {
                                      "timeline": {"export began": 4.0},
                                      "engine_timeline": {
                                          "export started": 0.2 + rep,
                                          "import finished": 37.0}}})
        headers, rows = bench.timeline_table()
        self.assertEqual("export started", headers[1])
        self.assertEqual(["dtn-migrate pipelined", "0.7", "–"],
                         rows[0][:3])
        # Runs from before the events were kept: the notifications'.
        for s in bench.samples:
            del s["extra"]["engine_timeline"]
        headers, rows = bench.timeline_table()
        self.assertEqual("export began", headers[1])
        self.assertEqual("4.0", rows[0][1])


class MigrationSettingsTest(testcase.TestCase):
    """benchmarks.migration --settings: shipped runs the engines and
    agents as an operator would, tests as the functional tests do.
    """

    def args(self, settings):
        return argparse.Namespace(settings=settings, export_sha512="auto")

    def test_shipped_is_the_options_defaults_without_debug_logs(self):
        args = self.args("shipped")
        engine = migration.engine_conf(args)
        defaults = {o.name: o.default for o in engine_opts.engine_opts}
        for name in migration.TEST_TUNED:
            self.assertEqual(defaults[name], engine["engine"][name])
        # The benchmark's patience on a loaded machine stays.
        self.assertEqual(300, engine["engine"]["stall_timeout"])
        self.assertEqual("false", engine["DEFAULT"]["debug"])
        self.assertEqual({"DEFAULT": {"debug": "false"}},
                         migration.agent_conf(args))
        self.assertIsNone(migration.commit_interval(args))
        cloud = _clouds.Cloud("a", tempfile.mkdtemp(prefix="dtnm-bt-"),
                              commit_interval_bytes=None)
        self.addCleanup(shutil.rmtree, os.path.dirname(cloud.dir), True)
        self.assertNotIn("commit_interval_bytes", cloud.staging)

    def test_tests_keeps_the_functional_tests_settings(self):
        args = self.args("tests")
        engine = migration.engine_conf(args)
        self.assertEqual({"stall_timeout": 300}, engine["engine"])
        self.assertNotIn("DEFAULT", engine)
        self.assertEqual({}, migration.agent_conf(args))
        self.assertEqual(16 << 20, migration.commit_interval(args))
        cloud = _clouds.Cloud("a", tempfile.mkdtemp(prefix="dtnm-bt-"),
                              commit_interval_bytes=16 << 20)
        self.addCleanup(shutil.rmtree, os.path.dirname(cloud.dir), True)
        self.assertEqual(16 << 20, cloud.staging["commit_interval_bytes"])

    def test_agent_options_go_over_the_settings(self):
        args = self.args("shipped")
        args.agent_option = ["transfer.receive_low_water=false",
                             "debug=true", "a.b.c=x=y"]
        self.assertEqual({"DEFAULT": {"debug": "true"},
                          "transfer": {"receive_low_water": "false"},
                          "a.b": {"c": "x=y"}},
                         migration.agent_conf(args))

    def test_a_malformed_agent_option_is_refused(self):
        for bad in ("transfer.receive_low_water", "transfer.=x", "=x"):
            self.assertRaises(argparse.ArgumentTypeError,
                              migration._agent_option, bad)
        self.assertEqual("transfer.x=", migration._agent_option(
            "transfer.x="))


class _Glance:
    """Glance B as benchmarks.migration sees it: images by id, a delete
    that a half-deleted image refuses, as Glance does, and an import
    that holds the image for two polls after it went active.
    """

    def __init__(self, images):
        self.store = {i["id"]: dict(i) for i in images}
        self.deleted = []
        self.images = self
        self.held = 0

    def list(self):
        return list(self.store.values())

    def delete(self, image_id):
        if self.store[image_id]["status"] == "deleted":
            raise RuntimeError("HTTP 400 Bad Request: Image status "
                               "transition from deleted to deleted is not "
                               "allowed")
        self.deleted.append(image_id)
        del self.store[image_id]

    def create(self, **fields):
        self.store["gd"] = dict(fields, id="gd", status="queued")
        return self.store["gd"]

    def image_import(self, image_id, **kwargs):
        self.store[image_id].update(status="active", size=4,
                                    os_glance_import_task="t")
        self.held = 2

    def get(self, image_id):
        image = self.store[image_id]
        if image.get("os_glance_import_task"):
            self.held -= 1
            if self.held < 0:
                del image["os_glance_import_task"]
        return dict(image)

    def get_associated_image_tasks(self, image_id):
        return {"tasks": [{"id": "t", "status": "success"}]}


class MigrationTidyTest(testcase.TestCase):
    """benchmarks.migration between runs: Glance B's images go, a
    half-deleted one is left, and a glance-download's image is deleted
    only once Glance's import let go of it.
    """

    def bench(self, glance):
        work = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, work, True)
        clouds = argparse.Namespace(link_endpoint="http://link")
        for name in ("a", "b"):
            staging = os.path.join(work, name)
            os.makedirs(os.path.join(staging, "tid"))
            setattr(clouds, name, argparse.Namespace(
                staging_dir=staging, client=lambda: glance,
                images=lambda: glance))
        bench = migration.Bench(argparse.Namespace(timeout=30))
        bench.clouds = clouds
        bench.source = {"size": 4, "image_id": "src", "sha512": "x"}
        return bench

    def test_half_deleted_images_are_left_and_the_rest_removed(self):
        glance = _Glance([{"id": "1", "status": "active"},
                          {"id": "2", "status": "deleted"},
                          {"id": "3", "status": "queued"}])
        bench = self.bench(glance)
        bench.tidy()
        self.assertEqual(["1", "3"], glance.deleted)
        self.assertEqual(["2"], list(glance.store))
        for c in (bench.clouds.a, bench.clouds.b):
            self.assertEqual([], os.listdir(c.staging_dir))

    def test_glance_download_returns_once_the_import_let_go(self):
        glance = _Glance([])
        bench = self.bench(glance)
        bench.check_peer_image = lambda image_id: None
        [(name, seconds, extra)] = bench.run_glance_download()
        self.assertEqual("glance-download", name)
        self.assertNotIn("os_glance_import_task", glance.store["gd"])
        bench.tidy()
        self.assertEqual(["gd"], glance.deleted)


class PageCostTest(testcase.TestCase):
    """--page-cost: what writing new file data costs the machine."""

    def test_every_case_measured_each_repetition(self):
        d = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, d, True)
        got = migration.page_cost(d, 2, settle=0, size=4 << 20,
                                  log=lambda *a: None)
        self.assertEqual(set(migration.PAGE_COST_CASES), set(got))
        for values in got.values():
            self.assertEqual(2, len(values))
            self.assertTrue(all(v >= 0 for v in values))
        self.assertEqual([], os.listdir(d))
        headers, rows = migration.page_cost_table(
            {"cpu_s_per_GiB": got})
        self.assertEqual(list(migration.PAGE_COST_CASES),
                         [r[0] for r in rows])


class PlotFailureTest(testcase.TestCase):
    """A run whose figures cannot be drawn (no matplotlib) keeps its
    results and tables, says where they are and how to draw the figures
    again, and exits non-zero.
    """

    def test_the_results_outlive_their_figures(self):
        out = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, out, True)
        bench = migration.Bench(argparse.Namespace(out=out))
        bench.source = {"size": 1 << 30}
        bench.settings = {"repeat": 1, "rate": "1gbit", "mtu": 1500}
        bench.samples = [{"what": what, "rep": 0, "seconds": seconds,
                          "extra": {}} for what, seconds in (
                              ("pipelined", 9.0), ("export", 1.0),
                              ("transfer", 8.6), ("import", 8.0))]
        with no_matplotlib() as err:
            rc = bench.save(final=True)
        self.assertEqual(report.RENDER_FAILED, rc)
        path = os.path.join(out, "results.json")
        with open(path) as f:
            self.assertEqual(bench.samples, json.load(f)["samples"])
        self.assertTrue(os.path.exists(os.path.join(out, "results.rst")))
        self.assertTrue(os.path.exists(os.path.join(out, "targets.md")))
        self.assertIn(path, err.getvalue())
        self.assertIn("--from-json %s" % path, err.getvalue())
