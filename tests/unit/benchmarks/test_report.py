"""benchmarks.report: verdicts, the order results are written in, and
the tables."""

import argparse
import configparser
import os
import re
import shutil
import tempfile
from unittest import mock

from benchmarks import report
from tests.unit.benchmarks import no_matplotlib
from tests.unit import testcase


class VerdictTest(testcase.TestCase):
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


class RenderTest(testcase.TestCase):
    """The tables and figures come after the results are saved, and one
    that cannot be written neither stops the others nor loses them.
    """

    def setUp(self):
        super().setUp()
        self.out = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def test_every_step_runs_and_the_failure_names_the_results(self):
        path = report.write_json(os.path.join(self.out, "results.json"),
                                 {"samples": [1, 2]})
        ran = []

        def tables():
            ran.append("tables")

        def figures():
            report.grouped_bars(os.path.join(self.out, "x.png"), ["g"],
                                ["s"], {"s": {"g": 1.0}})

        with no_matplotlib() as err:
            rc = report.render(path, "python -m benchmarks.x --render",
                               figures, tables)
        self.assertEqual(report.RENDER_FAILED, rc)
        self.assertEqual(["tables"], ran)
        text = err.getvalue()
        self.assertIn("could not write the figures: ModuleNotFoundError: "
                      "import of matplotlib halted", text)
        self.assertIn(path, text)
        self.assertIn("python -m benchmarks.x --render", text)
        self.assertIn(".[benchmarks]", text)
        self.assertEqual(0, report.render(path, "redo", tables))

    def test_no_results_no_rendering(self):
        self.assertRaises(FileNotFoundError, report.render,
                          os.path.join(self.out, "results.json"), "redo")

    def test_a_run_does_not_start_without_what_the_figures_need(self):
        with no_matplotlib():
            with self.assertRaises(SystemExit) as got:
                report.require_plotting()
        self.assertIn("pip install -e '.[benchmarks]'", str(got.exception))

    def test_a_stopped_run_keeps_what_it_measured(self):
        with mock.patch("sys.stderr"):
            self.assertEqual(1, report.stopped({"reps": [1]}, self.out,
                                               RuntimeError("no")))
        with open(os.path.join(self.out, "results.json")) as f:
            self.assertIn('"reps": [\n  1\n ]', f.read())

    def test_tables_in_both_formats_with_note_and_command(self):
        base = os.path.join(self.out, "t")
        with mock.patch("builtins.print"):
            report.write_tables(base, (["a", "b"], [["1", "2"]]),
                                (["c"], []), note="A note.", command="x y")
        with open(base + ".md") as f:
            md = f.read()
        with open(base + ".rst") as f:
            rst = f.read()
        self.assertTrue(md.startswith("A note.\n\n| a | b |"))
        self.assertIn("Command: `x y`", md)
        self.assertIn("Command::\n\n    x y\n", rst)
        self.assertNotIn("| c |", md)
        self.assertIsNone(report.write_tables(base + "2", (["c"], [])))
        self.assertFalse(os.path.exists(base + "2.md"))


class SmokeTest(testcase.TestCase):
    def parser(self):
        p = argparse.ArgumentParser()
        p.add_argument("--size", type=int, default="4")
        p.add_argument("--reps", type=int, default=3)
        p.add_argument("--out", default=report.default_out("x"))
        report.add_smoke(p, "x", {"size": 1, "reps": 1}, "1 s")
        return p

    def test_the_options_given_win(self):
        p = self.parser()
        args = report.apply_smoke(p.parse_args(["--smoke", "--reps", "7"]),
                                  p, "x", {"size": 1, "reps": 1})
        self.assertEqual((1, 7), (args.size, args.reps))
        self.assertEqual(report.default_out("x", smoke=True), args.out)
        args = report.apply_smoke(p.parse_args(["--out", "/o"]), p, "x",
                                  {"size": 1})
        self.assertEqual((4, "/o"), (args.size, args.out))


class ExtraTest(testcase.TestCase):
    """What the figures need is the benchmarks' extra, and the bootstrap
    installs it when a benchmark runs (DTN_BENCH=1).
    """

    TOP = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))

    def test_the_extra_and_its_bootstrap(self):
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(self.TOP, "setup.cfg"))
        extra = cfg.get("extras", "benchmarks").split()
        self.assertIn("matplotlib>=3.7", extra)
        self.assertIn(".[benchmarks]", report.PLOTTING_HINT)
        with open(os.path.join(self.TOP, "tools", "bootstrap.sh")) as f:
            script = f.read()
        blocks = re.findall(r'if \[ "\$\{DTN_BENCH:-0\}" = 1 \]; then\n'
                            r'(.*?)\nfi\n', script, re.S)
        self.assertTrue(any('pip" install -q -e "${TOP}[benchmarks]"' in b
                            for b in blocks), blocks)
