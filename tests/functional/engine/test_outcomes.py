"""Outcomes of a migration whose engine's process is killed (SIGKILL)
between the save and the removal of its staged files (the rest:
``tests/unit/engine/test_outcomes.py``).
"""

from tests.functional.engine import crash_worker
from tests.unit.engine import base


class TestStagedRemoval(base.EngineTestCase):
    def test_killed_between_the_save_and_the_removal(self):
        """The source engine's process is killed (SIGKILL) as it starts
        to remove the staged files of a migration it saved complete; the
        next engine on its database removes them.
        """
        db = "sqlite:///%s/crashed-a.sqlite" % self.tmp
        mid, _exported = crash_worker.crash(self.tmp, db, 11, "cleanup")
        a2 = self.engine("dtn-a", self.glance_a, db)
        rec = a2.get(mid)
        self.assertEqual(("complete", "pending"),
                         (rec["state"], rec["cleanup"]))
        self.assertIn("%s/image.data" % rec["transfer_id"], self.staged())
        self.assertEqual([], a2.resume_unfinished())
        a2.reconcile()
        self.assertEqual([], self.staged())
        self.assertIsNone(a2.get(mid)["cleanup"])
