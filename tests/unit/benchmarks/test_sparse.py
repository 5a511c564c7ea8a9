"""benchmarks.sparse: both levels run the benchmarks they build on,
the link-bytes target, and results that outlive their figures."""

import json
import os
import shutil
import tempfile
from unittest import mock

from benchmarks import _clouds
from benchmarks import migration
from benchmarks import report
from benchmarks import sparse
from benchmarks import throughput
from tests.unit.benchmarks import no_matplotlib
from tests.unit import testcase


class LinkTargetTest(testcase.TestCase):
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

    def test_the_layout_spreads_the_data_over_the_image(self):
        mib = 1 << 20
        self.assertEqual([(0, mib), (21 * mib, mib), (42 * mib, mib),
                          (63 * mib, mib)],
                         sparse.extents(64 * mib, 4 * mib, 4))
        self.assertEqual([(0, 5)], sparse.extents(100, 5, 1))

    def test_the_scattered_layout(self):
        mib, kib = 1 << 20, 1 << 10
        args = sparse.parser().parse_args([
            '--size', '8G', '--data', '10M', '--extents', '40',
            '--layout', 'scattered', '--seed', '7'])
        layout = sparse.layout(args)
        self.assertEqual(layout, sparse.layout(args))     # seeded
        self.assertEqual(40, len(layout))
        self.assertEqual({256 * kib}, {n for _, n in layout})
        self.assertEqual(sorted(layout), layout)
        for (a, n), (b, _) in zip(layout, layout[1:]):
            self.assertLess(a + n, b)                     # apart
        self.assertEqual({0}, {o % 4096 for o, _ in layout})
        self.assertLessEqual(layout[-1][0] + 256 * kib, 8192 * mib)
        args.align = 1
        self.assertNotEqual({0}, {o % 4096 for o, _ in sparse.layout(args)})
        self.assertRaises(ValueError, sparse.scattered, mib, mib, 8, 1)

    def test_export_written_is_read_from_engine_a_log(self):
        line = ('migration m: staged t/image.data (%d bytes, %d exported '
                'by this run in 3.1 s)\n')
        self.assertEqual(20, sparse.export_written(
            line % (100, 10) + line % (100, 20)))
        self.assertIsNone(sparse.export_written('no such line\n'))


class SparseLevelsTest(testcase.TestCase):
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

        def measure(targs, *rest, **kwargs):
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
                mock.patch.object(report, "require_plotting"), \
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


class PlotFailureTest(testcase.TestCase):
    """The migration level's results outlive its figure (no
    matplotlib): saved, with their tables, and the command that draws
    them again.
    """

    def test_the_results_outlive_their_figures(self):
        out = tempfile.mkdtemp(prefix="dtnm-bt-")
        self.addCleanup(shutil.rmtree, out, True)
        args = sparse.parser().parse_args(["--reps", "1", "--out", out])
        _, bench_class = sparse._migration_bench()
        bench = bench_class(sparse.migration_args(args))
        os.makedirs(bench.args.out)
        bench.source = {"size": 1 << 30, "data_bytes": 10 << 20}
        bench.settings = {"repeat": 1, "rate": "1gbit"}
        bench.samples = [{"what": what, "rep": 0, "seconds": seconds,
                          "extra": {"link": {"total": 11 << 20}}}
                         for what, seconds in (("pipelined", 9.0),
                                               ("download", 4.0),
                                               ("upload", 4.0))]
        with no_matplotlib() as err:
            rc = bench.save(final=True)
        self.assertEqual(report.RENDER_FAILED, rc)
        path = os.path.join(out, "migration", "results.json")
        with open(path) as f:
            self.assertEqual(3, len(json.load(f)["samples"]))
        self.assertTrue(os.path.exists(os.path.join(out, "migration",
                                                    "results.rst")))
        self.assertIn(path, err.getvalue())
        self.assertIn("python -m benchmarks.sparse --render", err.getvalue())
