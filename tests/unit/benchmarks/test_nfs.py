"""benchmarks.nfs: results that outlive their figures."""

import argparse
import json
import os
import shutil
import tempfile

from benchmarks import nfs
from benchmarks import report
from tests.unit.benchmarks import no_matplotlib
from tests.unit import testcase


class PlotFailureTest(testcase.TestCase):
    def test_the_results_outlive_their_figures(self):
        out = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, out, True)
        args = argparse.Namespace(
            series=["II", "R"], sizes=[1024, 1 << 20], link="1gbit",
            rate="1gbit", mtu=1500, burst=None, reps=1, blocks={},
            max_size=1 << 20, prod_size=1 << 20, peers=[], out=out,
            prefix="nfs")
        run = nfs.Run(args)
        for key in args.series:
            for bs in args.sizes:
                run.sizes[key][bs] = bs * 8
                run.samples[key][bs] = [{"bytes": bs * 8, "seconds": 0.1,
                                         "MBps": bs * 80 / 1e6}]
        with no_matplotlib() as err:
            rc = run.save(final=True)
        self.assertEqual(report.RENDER_FAILED, rc)
        path = os.path.join(out, "nfs.json")
        with open(path) as f:
            self.assertEqual(["1024", str(1 << 20)],
                             sorted(json.load(f)["samples"]["II"], key=int))
        self.assertTrue(os.path.exists(os.path.join(
            out, "nfs-throughput.rst")))
        self.assertIn("--from-json %s" % path, err.getvalue())
