"""The engine's live state of a running migration."""

import testtools

from dtn_migrate.engine import resources


class TestLiveSeed(testtools.TestCase):
    def test_complete_stages_of_an_earlier_run_are_kept(self):
        # A flow resumed after a database error does not run its finished
        # tasks again: their stages come from the record.
        live = resources.Live()
        live.stage("transfer", state="running", done=5)
        live.seed({"export": {"state": "complete", "done": 9, "size": 9},
                   "transfer": {"state": "complete", "done": 9},
                   "import": {"state": "failed", "done": 3},
                   "odd": None})
        self.assertEqual(
            {"export": {"state": "complete", "done": 9, "size": 9},
             "transfer": {"state": "running", "done": 5}},
            live.snapshot())
        live.seed(None)
        self.assertEqual(2, len(live.snapshot()))
