"""An engine that lost a migration to another (issue 39): once another
engine has claimed it, this engine's next save is refused (the epoch),
and so is its next command to the agent; its flow stops at once, and it
writes and undoes nothing more: no outcome, no cancel of the DTN
transfer, no removal of the images or files the new owner goes on with.
"""

import time

from dtn_migrate.engine import persistence
from tests.unit.engine import base


class TestTakenOver(base.EngineTestCase):

    def setUp(self):
        super().setUp()
        self.cancels = []
        cancel = self.agents.cancel_transfer

        def cancel_transfer(ctxt, host, transfer_id, epoch=None):
            self.cancels.append((host, transfer_id))
            return cancel(ctxt, host, transfer_id, epoch=epoch)

        self.agents.cancel_transfer = cancel_transfer
        self.agents.rate = 2 << 20

    def wait_for(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate()
            if found:
                return found
            time.sleep(0.02)
        self.fail("%s: not in %d s" % (what, timeout))

    def take_over(self, engine, migration_id):
        """Claim ``migration_id`` as "engine-1" in ``engine`` (as its
        conductor does), then as "engine-2" in another engine's store
        on the same database.
        """
        mine = engine.store.claim(migration_id, "engine-1",
                                  engine.store.record(migration_id)["epoch"])
        other = persistence.Store(engine.store.url)
        self.addCleanup(other.close)
        other.claim(migration_id, "engine-2", mine)
        return other

    def test_an_outgoing_migration_taken_mid_transfer(self):
        source = self.image(4 << 20)
        req = self.a.request("b", images=[source["id"]])
        mid = req["migrations"][0]["migration_id"]
        self.wait_for(lambda: (self.a.store.record(mid).get("bytes_transfer")
                               or 0) > 0, "bytes on the link")
        self.take_over(self.a, mid)
        self.assertTrue(self.a.wait_idle(30))
        rec = self.a.store.record(mid)
        # Nothing written after the takeover: neither an outcome nor a
        # cancel; the new owner's claim stands.
        self.assertEqual(("running", "engine-2", 2),
                         (rec["state"], rec["owner"], rec["epoch"]))
        self.assertIsNone(rec.get("finished_at"))
        self.assertEqual([], self.cancels)
        self.assertIsNone(self.a.store.held(mid))
        # Its staged files stay for the new owner.
        self.assertTrue(any(p.endswith(".data") or "data" in p
                            for p in self.staged("dtn-a")), self.staged())

    def test_an_import_taken_mid_transfer(self):
        source = self.image(4 << 20)
        req = self.a.request("b", images=[source["id"]])
        tid = req["migrations"][0]["transfer_id"]
        imports = self.wait_for(
            lambda: [r for r in self.b.list()
                     if r["transfer_id"] == tid and
                     self.glance_b.find("dtn_migrate_transfer_id", tid)],
            "the import's image")
        mid = imports[0]["migration_id"]
        self.take_over(self.b, mid)
        self.assertTrue(self.b.wait_idle(30))
        rec = self.b.store.record(mid)
        self.assertEqual(("running", "engine-2"),
                         (rec["state"], rec["owner"]))
        # The half-imported image stays: the new owner goes on with it.
        self.assertEqual(1, len(self.glance_b.find(
            "dtn_migrate_transfer_id", tid)))

    def test_the_agent_refuses_the_commands_of_an_earlier_claim(self):
        # Only the agent knows of the later claim here (the new owner's
        # announcement, agent.fences): the row still says engine-1, so
        # only the agent's refusal can stop this engine.
        source = self.image(4 << 20)
        req = self.a.request("b", images=[source["id"]])
        mid = req["migrations"][0]["migration_id"]
        tid = req["migrations"][0]["transfer_id"]
        self.a.store.claim(mid, "engine-1",
                           self.a.store.record(mid)["epoch"])
        self.wait_for(lambda: (self.a.store.record(mid).get("bytes_transfer")
                               or 0) > 0, "bytes on the link")
        self.agents.fence_transfer({}, "dtn-a", tid, 2)
        self.assertTrue(self.a.wait_idle(30))
        rec = self.a.store.record(mid)
        self.assertEqual(("running", "engine-1", 1),
                         (rec["state"], rec["owner"], rec["epoch"]))
        self.assertIsNone(rec.get("finished_at"))
        refused = [r for r in self.agents.refused if r[1] == tid]
        self.assertTrue(refused)
        self.assertEqual({("dtn-a", 1)}, {(r[0], r[3]) for r in refused})
        # Its revert, the cancel, is not even tried.
        self.assertEqual([], self.cancels)

    def test_an_import_report_of_an_earlier_claim_is_refused(self):
        source = self.image(4 << 20)
        req = self.a.request("b", images=[source["id"]])
        tid = req["migrations"][0]["transfer_id"]
        imports = self.wait_for(
            lambda: [r for r in self.b.list() if r["transfer_id"] == tid],
            "the import")
        mid = imports[0]["migration_id"]
        self.b.store.claim(mid, "engine-1",
                           self.b.store.record(mid)["epoch"])
        self.agents.fence_transfer({}, "dtn-b", tid, 2)
        self.assertTrue(self.b.wait_idle(30))
        rec = self.b.store.record(mid)
        self.assertEqual(("running", "engine-1"),
                         (rec["state"], rec["owner"]))
        self.assertIn(("dtn-b", tid, "report", 1), self.agents.refused)
        # No report of this claim reached the agent after the refusal.
        report = self.agents.reports.get(("dtn-b", tid)) or {}
        self.assertNotEqual("active", report.get("state"))
