"""benchmarks.protection: results that outlive their figure."""


from benchmarks import protection
from tests.unit.benchmarks import check_results_outlive_figures
from tests.unit import testcase


class PlotFailureTest(testcase.TestCase):
    def test_the_results_outlive_their_figure(self):
        sample = {key: 1.0 for key in protection.KEYS}
        check_results_outlive_figures(self, protection.write, {
            "args": {"sizes": [1]},
            "reps": [{path: {"1": sample} for path in protection.PATHS}]},
            "results.rst")
