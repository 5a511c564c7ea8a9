"""An engine whose process is killed (SIGKILL) mid-flow and the next
one on its database: resume from the persisted flow (the engines'
other tests, in one process: ``tests/unit/engine/test_migrations.py``).
"""

from tests.functional.engine import crash_worker
from tests.unit.engine import base


class TestResume(base.EngineTestCase):
    def test_resume_from_persisted_state(self):
        """Engine A's process is killed (SIGKILL) mid-flow, twice: in
        the transfer, after the export; then, resumed, while it waits
        for the peer, after the transfer.  Each resume from the persisted
        flow skips the finished tasks and runs the interrupted one again;
        a last engine, in this process, finishes the migration.
        """
        db = "sqlite:///%s/crashed-a.sqlite" % self.tmp
        size = len(crash_worker.image_data(7))
        mid, exported = crash_worker.crash(self.tmp, db, 7, "transfer")
        self.assertEqual(size, exported)
        states = crash_worker.task_states(db, mid)
        self.assertEqual(("SUCCESS", "RUNNING", "PENDING"), (
            states["stage-image"], states["transfer-image"],
            states["await-peer-import"]))
        # Killed again while it recovers: nothing exported this time.
        self.assertEqual((mid, 0), crash_worker.crash(
            self.tmp, db, 7, "report", mid))
        states = crash_worker.task_states(db, mid)
        self.assertEqual(("SUCCESS", "SUCCESS", "RUNNING"), (
            states["stage-image"], states["transfer-image"],
            states["await-peer-import"]))
        image = crash_worker.add_image(self.glance_a, 7)
        a2 = self.engine("dtn-a", self.glance_a, db)
        self.assertEqual("running", a2.get(mid)["state"])
        self.assertEqual([mid], a2.resume_unfinished())
        # What the killed process sent is at dtn-b: B's agent tells it.
        tid = a2.get(mid)["transfer_id"]
        self.b.incoming(tid, "a")
        self.assertTrue(a2.wait_idle(60))
        self.assertTrue(self.b.wait_idle(60))
        rec = a2.get(mid)
        self.assertEqual("complete", rec["state"], rec["error"])
        # Neither exported nor sent again by this engine.
        self.assertEqual(0, self.glance_a.downloaded)
        self.assertEqual({}, self.agents.transfers)
        [peer] = self.glance_b.find("dtn_migrate_transfer_id", tid)
        self.assertEqual(peer["id"], rec["peer_image"]["image_id"])
        self.assertEqual(image["os_hash_value"], peer["os_hash_value"])
        self.assertEqual(crash_worker.image_data(7),
                         self.glance_b.data[peer["id"]])
