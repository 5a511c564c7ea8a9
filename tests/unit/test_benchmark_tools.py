"""The benchmarks' own logic: CPU profile, page cache, staged reads,
comparisons of runs, the targets' verdicts and CPU by thread."""

import argparse
import datetime
import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

from benchmarks import _clouds
from benchmarks import compare_runs
from benchmarks import cpuprofile
from benchmarks import migration
from benchmarks import pagecache
from benchmarks import peers
from benchmarks import report
from benchmarks import runqueue
from benchmarks import sparse
from benchmarks import stagedread
from benchmarks import threadcpu
from benchmarks import throughput
from dtn_migrate.conf import engine as engine_opts

PERF_SCRIPT = """\
14707
\t    1234 copy_folio_from_iter_atomic ([kernel.kallsyms])
\t    5678 ksys_pwrite64 ([kernel.kallsyms])

14707
\t    2a3d0c [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
\t    1111 _PyEval_EvalFrameDefault (/usr/bin/python3.11)

14686
\t    12b8e8 _PyEval_EvalFrameDefault (/usr/bin/python3.11)

999
\t    1234 copy_folio_from_iter_atomic ([kernel.kallsyms])

14686
\t    4242 XXH3_update_avx2 (/x/_xxhash.cpython-311-x86_64-linux-gnu.so)
"""


class CpuProfileTest(unittest.TestCase):
    def test_leaf_of_each_sample_of_known_processes(self):
        counts = cpuprofile.parse(PERF_SCRIPT.splitlines(),
                                  {"14707": "engine-a", "14686": "dtn-b"})
        self.assertEqual({"write into page cache": 1, "libcrypto": 1},
                         dict(counts["engine-a"]))
        self.assertEqual({"Python": 1, "xxh3": 1}, dict(counts["dtn-b"]))
        self.assertEqual({"engine-a", "dtn-b"}, set(counts))

    def test_process_names(self):
        self.assertEqual("engine-a", cpuprofile._name(
            "/w/.venv/bin/dtn-migrate-engine --config-file "
            "/var/tmp/dtnm-bench-migration-x/engine-a-7661/engine.conf"))
        self.assertEqual("dtn-b", cpuprofile._name(
            "ip netns exec b /w/.venv/bin/dtn-migrate-agent --config-file "
            "/var/tmp/dtnm-bench-migration-x/dtn-b-4e4e/agent.conf"))
        self.assertIsNone(cpuprofile._name("/usr/bin/uwsgi --ini g.ini"))

    def test_the_glances_are_named_when_asked_for(self):
        cmd = ("/root/.cache/dtn-migrate/venv-clouds/bin/uwsgi --ini "
               "/var/tmp/dtnm-bench-migration-x/glance-b/uwsgi.ini")
        self.assertIsNone(cpuprofile._name(cmd))
        self.assertEqual("glance-b", cpuprofile._name(cmd, glance=True))
        self.assertIsNone(cpuprofile._name(
            "/usr/bin/uwsgi --ini /x/keystone-ks/uwsgi.ini", glance=True))
        self.assertEqual("engine-a", cpuprofile._name(
            "/w/.venv/bin/dtn-migrate-engine --config-file "
            "/var/tmp/d/engine-a-7661/engine.conf", glance=True))

    def test_kinds(self):
        self.assertEqual("socket copies",
                         cpuprofile.kind("_copy_to_iter", "[kernel.kallsyms]"))
        self.assertEqual("other kernel",
                         cpuprofile.kind("handle_softirqs",
                                         "[kernel.kallsyms]"))
        self.assertEqual("other", cpuprofile.kind("malloc", "libc.so.6"))
        # A Python linked against libpython (the dev clouds' uwsgi).
        self.assertEqual("Python", cpuprofile.kind(
            "_PyEval_EvalFrameDefault", "libpython3.11.so.1.0"))


class RunQueueTest(unittest.TestCase):
    SAMPLES = [
        (100.0, {"1": ["glance-b", 10.0, 1.0, ["1"]],
                 "2": ["dtn-b", 5.0, 2.0, ["2", "3"]],
                 "4": ["engine-a", 1.0, 0.5, ["4"]]}),
        (110.2, {"1": ["glance-b", 17.5, 3.5, ["1"]],
                 # A thread ended: its wait is gone with it.
                 "2": ["dtn-b", 9.0, 1.0, ["2"]],
                 "4": ["engine-a", 1.1, 0.6, ["4"]],
                 # Started inside the window.
                 "5": ["engine-b", 0.9, 0.3, ["5"]]}),
    ]

    def test_a_window_is_what_each_process_used_between_two_samples(self):
        seconds, rows = runqueue.window(self.SAMPLES, 99.9, 110.0)
        self.assertAlmostEqual(10.2, seconds)
        self.assertEqual(["glance-b", "dtn-b", "engine-b"],
                         [r[3] for r in rows])
        cpu, waited, pid, _ = rows[0]
        self.assertAlmostEqual(7.5, cpu)
        self.assertAlmostEqual(2.5, waited)
        self.assertEqual("1", pid)
        self.assertAlmostEqual(4.0, rows[1][0])
        self.assertIsNone(rows[1][1])
        self.assertAlmostEqual(0.3, rows[2][1])

    def test_a_snapshot_reads_this_process(self):
        me = str(os.getpid())
        got = runqueue.snapshot({me: "me", "999999999": "gone"})
        self.assertEqual(["me"], [v[0] for v in got.values()])
        name, cpu, wait, tids = got[me]
        self.assertGreater(cpu, 0)
        self.assertGreaterEqual(wait, 0)
        self.assertIn(me, tids)


class PageCacheTest(unittest.TestCase):
    def test_every_case_measured_each_repetition(self):
        with tempfile.TemporaryDirectory() as d:
            out = pagecache.measure(d, reps=2, settle=0, size=8 << 20,
                                    log=lambda _msg: None)
            self.assertEqual(set(pagecache.CASES), set(out))
            for case, values in out.items():
                self.assertEqual(2, len(values), case)
                self.assertTrue(all(v >= 0 for v in values), case)


class StagedReadTest(unittest.TestCase):
    def test_both_ways_read_the_file_each_repetition(self):
        with tempfile.TemporaryDirectory() as d:
            out = stagedread.measure(d, 8 << 20 | 5, reps=2,
                                     log=lambda _msg: None)
            self.assertEqual([], os.listdir(d))     # staged file removed
        self.assertEqual(set(stagedread.CASES), set(out))
        for case, values in out.items():
            self.assertEqual(2, len(values), case)
            self.assertTrue(all(cpu >= 0 and mbs > 0
                                for cpu, mbs in values), case)

    def test_sizes(self):
        self.assertEqual(2 << 30, stagedread._size("2G"))
        self.assertEqual(512 << 20, stagedread._size("512m"))
        self.assertEqual(1000, stagedread._size("1000"))
        self.assertRaises(ValueError, stagedread._size, "two")


class CompareRunsTest(unittest.TestCase):

    def run_dir(self, root, name, engine_a, seconds):
        d = os.path.join(root, name)
        os.makedirs(d)
        samples = [{"what": "pipelined", "seconds": s,
                    "extra": {"cpu_seconds": {"engine-a": e, "agent-a": 1.0,
                                              "agent-b": 2.0, "engine-b": 1.0,
                                              "glance-b": 7.0}}}
                   for e, s in zip(engine_a, seconds)]
        samples.append({"what": "export", "seconds": 1.0,
                        "extra": {"cpu_seconds": {"engine-a": 99.0}}})
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump({"command": "x", "settings": {"size": 2 << 30},
                       "samples": samples}, f)
        return d

    def test_labels_pool_their_runs(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root, True)
        runs = compare_runs.load([
            ("direct", self.run_dir(root, "d1", [4.0, 6.0], [20, 22])),
            ("buffered", self.run_dir(root, "b1", [8.0], [30])),
            ("direct", self.run_dir(root, "d2", [2.0], [21]))], "pipelined")
        self.assertEqual(["direct", "buffered"], list(runs))
        # CPU-s per GiB of a 2 GiB image; the export sample is not one.
        self.assertEqual([2.0, 3.0, 1.0], runs["direct"]["engine-a"])
        self.assertEqual([4.0, 5.0, 3.0], runs["direct"]["dtn-migrate"])
        self.assertEqual([20, 22, 21], runs["direct"]["seconds"])
        text = compare_runs.table(runs)
        self.assertIn("direct / buffered (medians)", text)
        # engine-a: median 2.0 against 4.0.
        self.assertIn("| 0.50 ", text)


class GridFTPVerifiedTest(unittest.TestCase):
    """GridFTP in its verified mode, and the targets read against it."""

    def test_verified_mode_checks_sha512_after_the_copy(self):
        peer = peers.make_peer('gridftp-verify', parallel=2)
        argv = [str(a) for a in peer._base()]
        self.assertEqual('gridftp-verify', peer.name)
        self.assertEqual(['-verify-checksum', '-checksum-alg', 'SHA512'],
                         argv[-3:])
        self.assertEqual(['-p', '2'], argv[2:4])
        plain = [str(a) for a in
                 peers.make_peer('gridftp', parallel=2)._base()]
        self.assertNotIn('-verify-checksum', plain)
        self.assertEqual(plain, argv[:len(plain)])

    def test_targets_against_both_gridftps(self):
        results = {'ratios': [{
            'link': 'loopback', 'workload': 'big', 'tool': 'dtn-migrate',
            'dtn-migrate/gridftp': 0.3,
            'dtn-migrate CPU/gridftp CPU': 3.5,
            'dtn-migrate/gridftp-verify': 1.9,
            'dtn-migrate CPU/gridftp-verify CPU': 0.7}]}
        got = {t['reference']: t for t in throughput.targets(results)}
        self.assertEqual({'gridftp', 'gridftp-verify'}, set(got))
        self.assertFalse(got['gridftp']['speed_met'])
        self.assertFalse(got['gridftp']['cpu_met'])
        self.assertTrue(got['gridftp-verify']['speed_met'])
        self.assertTrue(got['gridftp-verify']['cpu_met'])
        headers, rows = throughput.target_table(results | {
            'targets': throughput.targets(results)}, {})
        self.assertEqual('against', headers[3])
        self.assertEqual(['gridftp', 'gridftp-verify'],
                         sorted(r[3] for r in rows))

    def test_a_second_run_on_the_same_destination_is_refused(self):
        work = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, work, True)
        dst = os.path.join(work, "dst")
        held = throughput.hold_destination(dst)
        self.addCleanup(held.release)
        self.addCleanup(throughput._held.remove, held)
        with self.assertRaises(throughput.DestinationBusy) as got:
            throughput.hold_destination(dst + "/")
        self.assertIn("(pid %d)" % os.getpid(), str(got.exception))
        self.assertIn("--dst-dir", str(got.exception))
        other = throughput.hold_destination(os.path.join(work, "other"))
        self.addCleanup(other.release)
        self.addCleanup(throughput._held.remove, other)

    def test_a_server_that_read_no_cpu_has_no_cpu_figures(self):
        lost = throughput.checked_cpu({
            'bytes': 4 << 30, 'cpu_client_s': 10.0, 'cpu_server_s': 0.0,
            'cpu_s': 10.0, 'cpu_s_per_GiB': 2.5})
        self.assertIsNone(lost['cpu_s_per_GiB'])
        self.assertIsNone(lost['cpu_server_s'])
        self.assertEqual(10.0, lost['cpu_client_s'])
        self.assertIn('not captured', lost['cpu_note'])
        kept = {'bytes': 4 << 30, 'cpu_client_s': 1.0, 'cpu_server_s': 2.0,
                'cpu_s': 3.0, 'cpu_s_per_GiB': 0.75}
        self.assertEqual(kept, throughput.checked_cpu(dict(kept)))


class _Peer:
    """A tool that copies in no time."""

    def __init__(self, tool):
        self.tool = tool

    def setup(self, lab, src, dst):
        pass

    def describe(self):
        return self.tool

    def teardown(self):
        pass


class WarmUpTest(unittest.TestCase):
    """The first run of a block pays the machine's first touch of the
    memory it writes: untimed rounds take it off whichever tool runs
    first.
    """

    def block(self, *argv, fail_at=None):
        runs = []

        def run(peer, ds, lab):
            runs.append(peer.tool)
            if len(runs) == fail_at:
                raise peers.PeerError("refused")
            peer.last = {"tool": peer.tool, "bytes": 1 << 30,
                         "seconds": 1.0, "MBps": 1073.7}
            return {"client": 1.0, "server": float(len(runs)),
                    "link": None}

        args = throughput.parse_args(["--reps", "2", *argv])
        results = {"skipped": {}, "failures": [], "samples": [],
                   "settings": {"tools": {}}}
        with mock.patch.object(throughput, "make_peer",
                               lambda tool, **kw: _Peer(tool)), \
                mock.patch.object(throughput, "timed_run", run), \
                mock.patch("builtins.print"):
            throughput.run_block(args, results, None, "loopback", "big",
                                 argparse.Namespace(root="/data"),
                                 ["dtn-migrate", "gridftp"])
        return runs, results

    def test_one_round_by_default_recorded_nowhere(self):
        # The warm-up's gridftp run fails: printed, not recorded.
        runs, results = self.block(fail_at=2)
        self.assertEqual(["dtn-migrate", "gridftp",            # warm-up
                          "dtn-migrate", "gridftp",            # rep 0
                          "gridftp", "dtn-migrate"], runs)     # rep 1
        got = [(s["tool"], s["rep"], s["cpu_s"])
               for s in results["samples"]]
        # The first run (its server used 1.0 CPU-s) is in no sample.
        self.assertEqual([("dtn-migrate", 0, 4.0), ("gridftp", 0, 5.0),
                          ("gridftp", 1, 6.0), ("dtn-migrate", 1, 7.0)],
                         got)
        self.assertEqual([], results["failures"])

    def test_none_asked_for(self):
        runs, results = self.block("--warmup", "0")
        self.assertEqual(["dtn-migrate", "gridftp", "gridftp",
                          "dtn-migrate"], runs)
        self.assertEqual(4, len(results["samples"]))
        self.assertEqual(0, throughput.parse_args(["--smoke"]).warmup)


class MigrationWarmUpTest(unittest.TestCase):
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


class VerdictTest(unittest.TestCase):
    """A target is read over every repetition as well as the median."""

    def test_the_verdict_counts_the_repetitions(self):
        def at_most_one(v):
            return v <= 1.0
        self.assertEqual("met, 3 of 3 repetitions",
                         report.verdict(0.8, [0.7, 0.8, 0.9], at_most_one))
        self.assertEqual("met by the median only, 4 of 5 repetitions",
                         report.verdict(0.9, [0.7, 0.8, 0.9, 0.95, 1.1],
                                        at_most_one))
        self.assertEqual("NOT met, 1 of 3 repetitions",
                         report.verdict(1.2, [0.9, 1.2, 1.3], at_most_one))
        self.assertEqual("met, 2 of 2 repetitions",
                         report.verdict(0.5, [None, 0.5, 0.6], at_most_one))
        self.assertEqual("met", report.verdict(0.5, [], at_most_one))
        self.assertEqual("NOT met", report.verdict(2.0, None, at_most_one))
        self.assertEqual("not measured",
                         report.verdict(None, [0.5], at_most_one))

    def samples(self):
        """Three interleaved repetitions of dtn-migrate and GridFTP in its
        verified mode: dtn-migrate's first repetition is slow.
        """
        out = []
        for rep, (mb, cpu, ref_mb, ref_cpu) in enumerate([
                (300.0, 6.0, 250.0, 5.5), (450.0, 3.5, 230.0, 5.0),
                (470.0, 3.4, 240.0, 5.2)]):
            for tool, mbps, per_gib in (("dtn-migrate", mb, cpu),
                                        ("gridftp-verify", ref_mb, ref_cpu)):
                out.append({"link": "loopback", "workload": "big",
                            "tool": tool, "rep": rep, "MBps": mbps,
                            "seconds": 4294.967296 / mbps, "bytes": 4 << 30,
                            "cpu_s_per_GiB": per_gib})
        return out

    def test_throughput_targets_are_read_repetition_by_repetition(self):
        results = throughput.summarize(
            {"samples": self.samples()}, ["loopback"], ["big"],
            ["dtn-migrate", "gridftp-verify"])
        ratios = results["ratios"][0]
        self.assertEqual([1.2, 450 / 230, 470 / 240],
                         ratios["per_rep"]["dtn-migrate/gridftp-verify"])
        self.assertEqual(450 / 240, ratios["dtn-migrate/gridftp-verify"])
        t, = results["targets"]
        # The medians meet both targets; the slow first repetition does
        # not, and the verdicts say so.
        self.assertTrue(t["speed_met"])
        self.assertTrue(t["cpu_met"])
        self.assertEqual("met by the median only, 2 of 3 repetitions",
                         t["speed_verdict"])
        self.assertEqual("met by the median only, 2 of 3 repetitions",
                         t["cpu_verdict"])
        _, rows = throughput.target_table(results, {})
        self.assertEqual("1.88 (1.20–1.96): met by the median only, 2 of 3 "
                         "repetitions", rows[0][4])
        self.assertTrue(rows[0][5].startswith("0.67 (0.65–1.09): met by"))

    def test_a_repetition_that_lacks_a_tool_is_not_counted(self):
        samples = [s for s in self.samples()
                   if not (s["rep"] == 0 and s["tool"] == "gridftp-verify")]
        results = throughput.summarize(
            {"samples": samples}, ["loopback"], ["big"],
            ["dtn-migrate", "gridftp-verify"])
        t, = results["targets"]
        self.assertIsNone(t["speed_reps"][0])
        self.assertEqual("met, 2 of 2 repetitions", t["speed_verdict"])

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

    def test_sparse_link_bytes_are_read_run_by_run(self):
        data = 10 << 20
        limit = sparse.link_target(data)
        self.assertEqual(
            "met by the median only, 2 of 3 repetitions",
            sparse.link_verdict(report.summarize(
                [limit - 1, limit + 1, limit - 2]), data))
        self.assertEqual("met, 1 of 1 repetitions", sparse.link_verdict(
            report.summarize([limit]), data))
        self.assertEqual("–", sparse.link_verdict(None, data))
        self.assertEqual("–", sparse.link_verdict(
            report.summarize([1.0]), 0))


class MigrationFloorTest(unittest.TestCase):
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


class SparseLevelsTest(unittest.TestCase):
    """benchmarks.sparse runs benchmarks.throughput (transfer level) and
    benchmarks.migration (migration level): each gets every option of
    the benchmark it runs, at that benchmark's default where the sparse
    run does not set it.  (Both levels failed at once with an
    AttributeError when those benchmarks gained --warmup and
    --settings.)
    """

    def setUp(self):
        super().setUp()
        self.args = sparse.parser().parse_args(["--reps", "2"])

    def test_transfer_level(self):
        got = []

        def measure(targs, *rest):
            got.append(targs)
            raise StopIteration
        with mock.patch.object(throughput, "measure", measure), \
                mock.patch.object(sparse, "SparseImage"):
            self.assertRaises(StopIteration, sparse.run_transfer, self.args)
        [targs] = got
        options = vars(throughput.parse_args([]))
        self.assertEqual([], sorted(set(options) - set(vars(targs))))
        self.assertEqual(0, targs.warmup)
        self.assertEqual(2, targs.reps)
        self.assertEqual(os.path.join(self.args.out, "transfer"), targs.out)

    def test_migration_level(self):
        got = []

        class Bench:
            def __init__(self, margs):
                got.append(margs)
                raise StopIteration
        disk = mock.Mock(free=1 << 50)
        with mock.patch.object(sparse, "_migration_bench",
                               return_value=(migration, Bench)), \
                mock.patch.object(_clouds, "check", return_value=None), \
                mock.patch.object(sparse.shutil, "disk_usage",
                                  return_value=disk):
            self.assertRaises(StopIteration, sparse.run_migration,
                              self.args)
        [margs] = got
        options = vars(migration.parser().parse_args([]))
        self.assertEqual([], sorted(set(options) - set(vars(margs))))
        self.assertEqual((0, 2), (margs.warmup, margs.repeat))
        self.assertEqual(list(sparse.MIGRATION_MODES), margs.modes)
        # The clouds' settings are the migration benchmark's defaults.
        self.assertEqual(migration.engine_conf(migration.parser().parse_args(
            [])), migration.engine_conf(margs))
        self.assertEqual({"DEFAULT": {"debug": "false"}},
                         migration.agent_conf(margs))


class MigrationSettingsTest(unittest.TestCase):
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


class MigrationTidyTest(unittest.TestCase):
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


PY_SPY_DUMP = """\
Process 20610: dtn-migrate-agent --config-file /x/dtn-b-1/agent.conf
Python v3.11.2 (/usr/bin/python3.11)

Thread 20622 (idle): "sink-io_2"
    _worker (concurrent/futures/thread.py:81)
    Thread.run (threading.py:975)
Thread 20612 (active): "sink-io_0"
    ResumableSha512.update (dtn_migrate/transfer/checksum.py:98)
Thread 20260 (idle): "Thread-2 (_runner)"
    TCPTransport._read (amqp/transport.py:648)
Thread 20306 (idle): "Thread-3"
    Condition.wait (threading.py:324)
    LoopingCallBase._sleep (oslo_service/backend/_threading/loopingcall.py:84)
Thread 21003 (idle): "flow-62ade6bd_0"
    HTTPConnection.send (http/client.py:998)
"""


class ThreadCpuTest(unittest.TestCase):
    def test_threads_are_named_by_pool_or_by_their_code(self):
        self.assertEqual({20622: "sink-io", 20612: "sink-io",
                          20260: "_runner",
                          20306: "LoopingCallBase._sleep",
                          21003: "flow"},
                         threadcpu.thread_names(PY_SPY_DUMP))

    def test_repetitions_are_charged_with_what_each_thread_used(self):
        s = threadcpu.Sampler(dump_after=1e9)
        s.names = {("agent-b", 1): "sink-io", ("agent-b", 2): "sink-io",
                   ("engine-b", 3): "flow"}
        s.now = {("agent-b", 1): 5.0, ("agent-b", 2): 1.0,
                 ("engine-b", 3): 2.0}
        s.rep = {"number": 1, "mode": "pipelined", "start": dict(s.now),
                 "name_at": None}
        s.now = {("agent-b", 1): 7.5, ("agent-b", 2): 3.0,
                 ("engine-b", 3): 2.5, ("engine-a", 9): 1.25}
        s.close_rep()
        self.assertEqual([{"repetition": 1, "mode": "pipelined", "threads": [
            ["agent-b", "sink-io", 4.5], ["engine-a", threadcpu.ENDED, 1.25],
            ["engine-b", "flow", 0.5]]}], s.reps)
        table = threadcpu.table(s.reps)
        self.assertIn("| **agent-b** | all | **4.5** |", table)
        self.assertIn("| **all four** | – | **6.2** |", table)
        rst = threadcpu.table_rst(s.reps)
        self.assertIn("   * - **agent-b**\n     - all\n     - **4.5**\n",
                      rst)

    def test_benchmark_lines_open_and_close_repetitions(self):
        self.assertEqual(("2", "pipelined"), threadcpu.BEGIN.search(
            "[03:14:23] repetition 2 of 2: pipelined").groups())
        self.assertEqual("pipelined", threadcpu.END.search(
            "[03:15:06] pipelined           41.7 s   102.9 MB/s").group(1))
