"""benchmarks.api: results that outlive their figure."""


from benchmarks import api
from tests.unit.benchmarks import check_results_outlive_figures
from tests.unit import testcase


class PlotFailureTest(testcase.TestCase):
    def test_the_results_outlive_their_figure(self):
        rep = {"rep": 0, "running": 2}
        for target in api.TARGETS:
            times = [0.01, 0.02, 0.03]
            rep[target] = {"times": times, "cpu_s": 0.5,
                           "p50": api.percentile(times, 50),
                           "p99": api.percentile(times, 99)}
        check_results_outlive_figures(self, api.write, {
            "args": {"rows": 10, "background": 2}, "reps": [rep]},
            "results.rst")
