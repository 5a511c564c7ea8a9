"""benchmarks.ftlads: its reports are drawn from the JSON they saved."""

import json
import os
import shutil
import tempfile
from unittest import mock

from benchmarks import ftlads
from benchmarks import report
from tests.unit.benchmarks import no_matplotlib
from tests.unit import testcase


def _s(v):
    return report.summarize([v])


RECOVERY = {"small": {"FT off": {"TT": _s(2.0), "ER": {
    "20": _s(0.1), "80": _s(0.05)}}}}


class ReportTest(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.out = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def test_a_table_again_from_the_json(self):
        path = os.path.join(self.out, "ftlads-recovery.json")
        with open(path, "w") as f:
            json.dump({"link": "1gbit", "results": RECOVERY}, f)
        with mock.patch.object(report, "grouped_bars") as bars, \
                mock.patch("builtins.print"):
            self.assertEqual(0, ftlads.main(
                ["recovery", "--from-json", path, "--out", self.out]))
        with open(os.path.join(self.out, "ftlads-recovery.md")) as f:
            table = f.read()
        self.assertIn("| ER at 20 % | ER at 80 % |", table)
        self.assertIn(" 10.0 % | ", table)
        self.assertEqual(["20 %", "80 %"], bars.call_args[0][1])

    def test_the_results_outlive_their_figures(self):
        # The space experiment, with logs that record nothing to disk.
        log = mock.Mock(space=mock.Mock(return_value=4096))
        with no_matplotlib() as err, \
                mock.patch.object(ftlads.objectlog, "open_log",
                                  return_value=log), \
                mock.patch.object(report, "require_plotting", create=True):
            rc = ftlads.main(["space", "--out", self.out])
        self.assertEqual(report.RENDER_FAILED, rc)
        path = os.path.join(self.out, "ftlads-space.json")
        with open(path) as f:
            self.assertEqual({"big (8 x 512 MiB)", "small (4000 x 1 MiB)"},
                             set(json.load(f)["results"]))
        self.assertTrue(os.path.exists(os.path.join(
            self.out, "ftlads-space.rst")))
        self.assertIn("space --from-json %s" % path, err.getvalue())
