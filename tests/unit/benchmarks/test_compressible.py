"""benchmarks.compressible runs benchmarks.throughput with every one of
its options."""


from benchmarks import compressible
from benchmarks import throughput

from tests.unit import testcase


class ThroughputOptionsTest(testcase.TestCase):
    """(It stopped with an AttributeError as soon as benchmarks.throughput
    gained --warmup.)
    """

    def test_every_option_of_the_benchmark_it_runs(self):
        args = compressible.parse_args([])
        options = vars(throughput.parse_args([]))
        self.assertEqual([], sorted(set(options) - set(vars(args))))
        self.assertEqual((1, "100mbit,1gbit", 3),
                         (args.warmup, args.links, args.reps))
        smoke = compressible.parse_args(["--smoke"])
        self.assertEqual((0, 1, "/usr/lib/python3"),
                         (smoke.warmup, smoke.reps, smoke.source))
