"""benchmarks.throughput: the targets read against GridFTP, the
warm-up, the destination lock, and results that outlive their figures."""

import argparse
import json
import os
import shutil
import tempfile
from unittest import mock

from benchmarks import peers
from benchmarks import report
from benchmarks import throughput
from tests.unit.benchmarks import no_matplotlib
from tests.unit import testcase


class TargetsTest(testcase.TestCase):
    """The targets against both GridFTPs, repetition by repetition, and
    the samples they are read from.
    """

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


class DestinationTest(testcase.TestCase):
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


class WarmUpTest(testcase.TestCase):
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


class PlotFailureTest(testcase.TestCase):
    """A run whose figures cannot be drawn (here: no matplotlib) keeps
    its results on disk, its tables too, says where they are and how to
    draw the figures again, and exits non-zero.
    """

    def test_the_results_outlive_their_figures(self):
        out = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, out, True)
        args = throughput.parse_args(["--reps", "1", "--out", out])
        sample = {"link": "loopback", "workload": "big", "tool": "gridftp",
                  "rep": 0, "MBps": 500.0, "seconds": 2.0, "bytes": 1 << 30,
                  "cpu_s_per_GiB": 2.0}
        results = {"command": "x", "samples": [sample],
                   "settings": {"reps": 1, "tools": {"gridftp": "g"}}}
        with no_matplotlib() as err:
            rc = throughput.write_outputs(
                results, args, ["loopback"], ["big"], ["gridftp"],
                {"big": "1 x 1G"})
        self.assertEqual(report.RENDER_FAILED, rc)
        path = os.path.join(out, "results.json")
        with open(path) as f:
            self.assertEqual([sample], json.load(f)["samples"])
        self.assertTrue(os.path.exists(os.path.join(out, "table.md")))
        self.assertIn(path, err.getvalue())
        self.assertIn("python -m benchmarks.throughput --render --out " + out,
                      err.getvalue())
        # A benchmark that runs this one (sparse, compressible): its own
        # tables are written too, and its command draws them again.
        extra = []
        with no_matplotlib() as err:
            rc = throughput.write_outputs(
                results, args, ["loopback"], ["big"], ["gridftp"],
                {"big": "1 x 1G"}, redo="python -m benchmarks.y --render",
                extras=[("extra table", lambda r, o: extra.append(o))])
        self.assertEqual((report.RENDER_FAILED, [out]), (rc, extra))
        self.assertIn("again with: python -m benchmarks.y --render",
                      err.getvalue())
