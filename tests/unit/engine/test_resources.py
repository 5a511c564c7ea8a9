"""The engine's resources: the live state of a running migration and
the removal of staged files.
"""

import os
import shutil
import tempfile
from unittest import mock


from dtn_migrate.engine import resources
from dtn_migrate import exception
from dtn_migrate.staging import backend as staging_backend
from dtn_migrate.staging import localfs
from tests.unit.engine import test_tasks
from tests.unit import testcase

TID = test_tasks.TID
MID = test_tasks.MID


class TestLiveSeed(testcase.TestCase):
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


class TestRemoveStaged(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="dtnm-res-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.backend = localfs.LocalBackend(self.root)

    def test_configured_suffix_and_the_directory(self):
        res = test_tasks.make_res(backend=self.backend)
        for leaf in ("image.data", "image.data.wm", "image.json"):
            self.backend.write_small("%s/%s" % (TID, leaf), b"x")
        self.assertTrue(res.remove_staged_quietly(TID, "test"))
        self.assertEqual([], os.listdir(self.root))
        # Nothing left: not an error.
        self.assertTrue(res.remove_staged_quietly(TID, "test"))

    def test_best_effort(self):
        backend = mock.Mock()
        backend.remove.side_effect = staging_backend.Unavailable(
            "server gone")
        res = test_tasks.make_res(backend=backend)
        self.assertFalse(res.remove_staged_quietly(TID, "test"))


class TestAgentCommands(testcase.TestCase):
    """Commands to the agent carry this engine's claim (issue 39)."""

    def setUp(self):
        super().setUp()
        self.agent = mock.Mock()
        self.res = test_tasks.make_res(agent=self.agent)
        self.held = {}
        self.res.use_claims(self.held.get)

    def test_the_claim_s_epoch_is_carried(self):
        self.res.command(MID, "get_transfer", TID)
        self.agent.get_transfer.assert_called_once_with({}, "dtn-a", TID)
        self.held[MID] = 4
        self.res.command(MID, "cancel_transfer", TID)
        self.agent.cancel_transfer.assert_called_once_with(
            {}, "dtn-a", TID, epoch=4)

    def test_a_refused_claim_fences_the_migration(self):
        self.held[MID] = 1
        live = self.res.live_for(MID)
        self.agent.get_transfer.side_effect = exception.StaleEpoch(
            transfer_id=TID, epoch=1, held=2, command="get")
        err = self.assertRaises(exception.MigrationSuspended,
                                self.res.command, MID, "get_transfer", TID)
        self.assertIn("a later claim (epoch 2)", str(err))
        self.assertTrue(live.fenced.is_set())
        self.assertTrue(live.stop.is_set())

    def test_a_quiet_cancel_of_a_refused_claim_is_logged(self):
        self.held[MID] = 1
        self.agent.cancel_transfer.side_effect = exception.StaleEpoch(
            transfer_id=TID, epoch=1, held=2, command="cancel")
        self.res.cancel_transfer_quietly(TID, MID)
        self.agent.cancel_transfer.assert_called_once_with(
            {}, "dtn-a", TID, epoch=1)
