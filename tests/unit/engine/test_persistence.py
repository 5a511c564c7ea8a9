"""A migration record's progress, rate and ETA as the engine saves them
(issue 37 item 5).
"""

import shutil
import tempfile
import types

from oslo_utils import uuidutils
from taskflow.persistence import models

from dtn_migrate.engine import migrations
from dtn_migrate.engine import persistence
from dtn_migrate.engine import resources
from dtn_migrate import exception
from tests.unit import testcase

MID = "a" * 32
SIZE = 1000


def _atom(detail, name):
    """The atom detail named ``name`` of a flow detail."""
    [atom] = [a for a in detail if a.name == name]
    return atom


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class TestProgress(testcase.TestCase):
    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-progress-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.clock = Clock()
        self.store = persistence.Store("sqlite:///%s/e.sqlite" % tmp,
                                       clock=self.clock)
        self.addCleanup(self.store.close)

    def running(self, mode="pipelined", direction="outgoing"):
        self.store.create(MID, {"state": "running", "direction": direction,
                                "mode": mode, "size": SIZE})

    def save(self, seconds=1.0, **stages):
        self.clock.now += seconds
        return self.store.save(MID, stages=stages)

    def test_a_failed_record_names_the_stage_that_failed(self):
        # Before: the first stage not done, the transfer (the issue's
        # "stage transfer for an import refusal": the peer refused the
        # import when part of the bytes had crossed).
        self.running()
        self.save(preflight={"state": "complete"},
                  export={"state": "complete", "done": SIZE},
                  transfer={"state": "running", "done": SIZE // 2})
        self.clock.now += 1
        rec = self.store.save(MID, state="failed", stages={
            "preflight": {"state": "complete"},
            "export": {"state": "complete", "done": SIZE},
            "transfer": {"state": "running", "done": SIZE // 2},
            "import": {"state": "failed", "done": 0}})
        self.assertEqual("import", rec["stage"])
        # A failure no stage claims: the first stage not done.
        self.assertEqual("transfer", persistence.derive({
            "state": "failed", "direction": "outgoing", "size": SIZE,
            "stages": {"export": {"state": "complete", "done": SIZE},
                       "transfer": {"state": "running",
                                    "done": SIZE // 2}}})["stage"])

    def test_no_eta_from_a_first_rate_sample(self):
        # Before: the first sample's rate gave the ETA at once (the
        # issue's "ETA 35:12:23").
        self.running()
        self.save(export={"state": "running", "done": 0, "rate": 0.01})
        rec = self.save(export={"state": "running", "done": 100,
                                "rate": 0.01})
        self.assertIsNone(rec["eta"])
        for done in (200, 300, 400, 500):
            rec = self.save(export={"state": "running", "done": done})
            self.assertIsNone(rec["eta"])
        rec = self.save(export={"state": "running", "done": 600})
        # Known now (five seconds since it was first seen moving): 100
        # B/s.  The stages run at once, and those not
        # begun take that rate: the transfer's and import's 1000 B.
        self.assertEqual(10.0, round(rec["eta"], 1))
        self.assertEqual(100.0, rec["rate"])

    def test_eta_covers_the_work_left_in_every_stage(self):
        # Serial: a fast export's rate stands for nothing that follows
        # once the transfer moves (before: ETA 00:06 of 64 s).
        self.running(mode="serial")
        for done in range(0, 800, 100):
            rec = self.save(export={"state": "running", "done": done})
        # The stages to come take the export's rate until theirs is
        # known: 300 B at 100 B/s, then 2 * 1000 B at 100 B/s.
        self.assertEqual(23.0, round(rec["eta"], 1))
        self.save(export={"state": "complete", "done": SIZE},
                  transfer={"state": "running", "done": 0})
        rec = self.save(export={"state": "complete", "done": SIZE},
                        transfer={"state": "running", "done": 10})
        self.assertIsNone(rec["eta"])     # its own rate is not known yet
        for done in range(20, 80, 10):
            rec = self.save(export={"state": "complete", "done": SIZE},
                            transfer={"state": "running", "done": done})
        # 930 B at 10 B/s, then the import's 1000 B at the slowest rate.
        self.assertEqual(193.0, round(rec["eta"], 1))

    def test_progress_is_weighted_by_each_stage_s_work(self):
        # Before: a third the moment a fast export ended (the issue's
        # 33.7 %), whatever the transfer and import had left.
        self.running()
        for n in range(8):
            rec = self.save(export={"state": "running", "done": 100 * n},
                            transfer={"state": "running", "done": 10 * n},
                            **{"import": {"state": "uploading",
                                          "done": 10 * n}})
        # A byte takes the export 1/100 s, the transfer and import 1/10:
        # (7 + 7 + 7) / (10 + 100 + 100).
        self.assertEqual(0.1, rec["progress"])
        self.assertEqual(93.0, round(rec["eta"], 1))

    def test_progress_never_goes_back(self):
        # Before: the import restarted by the peer engine's restart took
        # the progress back.
        self.running(direction="incoming")
        rec = self.save(**{"import": {"state": "uploading", "done": 600}})
        self.assertEqual(0.6, rec["progress"])
        rec = self.save(**{"import": {"state": "uploading", "done": 0}})
        self.assertEqual(0.6, rec["progress"])
        self.assertEqual(0, rec["bytes_import"])
        # A new attempt starts from nothing.
        rec = self.store.new_run(MID, state="queued", stages={})
        self.assertEqual(0.0, rec["progress"])

    def test_import_shows_no_more_than_the_transfer(self):
        # Before: 272 MiB imported against 264 MiB sent.
        self.running()
        rec = self.save(export={"state": "running", "done": 300},
                        transfer={"state": "running", "done": 264},
                        **{"import": {"state": "uploading", "done": 272}})
        self.assertEqual((300, 264, 264),
                         (rec["bytes_export"], rec["bytes_transfer"],
                          rec["bytes_import"]))
        rec = self.save(export={"state": "complete", "done": SIZE},
                        transfer={"state": "complete", "done": SIZE},
                        **{"import": {"state": "uploading", "done": 990}})
        self.assertEqual(990, rec["bytes_import"])

    def test_a_retry_carries_nothing_of_the_last_attempt(self):
        # Nothing measured of the failed attempt (averages, samples, the
        # progress reached) counts for the retry.
        self.running()
        for done in range(0, 800, 100):
            rec = self.save(transfer={"state": "running", "done": done})
        self.assertIsNotNone(rec["eta"])
        self.store.save(MID, state="failed", error="x")
        self.store.new_run(MID, state="queued", stages={})
        self.store.save(MID, state="running")
        rec = self.save(60.0, transfer={"state": "running", "done": 900})
        self.assertEqual((None, None, 900),
                         (rec["rate"], rec["eta"], rec["bytes_transfer"]))
        self.assertNotIn("avg_rate", rec["stages"]["transfer"])
        self.assertNotIn("rate_base", rec["stages"]["transfer"])

    def test_the_live_record_keeps_the_smoothed_rates(self):
        # Before: the engine's own view of a running migration (its RPC
        # get_migration) took the live stages whole, without the rates
        # the row had smoothed: no ETA ever.
        self.running()
        for done in range(0, 800, 100):
            rec = self.save(transfer={"state": "running", "done": done})
        live = resources.Live()
        live.stage("transfer", state="running", done=800, rate=5.0)
        engine = types.SimpleNamespace(
            res=types.SimpleNamespace(live={MID: live}))
        shown = migrations.Migrations._record(engine, rec)
        self.assertEqual(100.0, round(shown["rate"], 1))
        self.assertEqual(800, shown["bytes_transfer"])
        # The export and import, not begun, take its rate: 1000 B left.
        self.assertEqual(10.0, round(shown["eta"], 1))


class TestFencing(testcase.TestCase):
    """A record's owner and epoch (issue 39): Store.claim moves the
    epoch on; a save carrying an older one writes nothing.
    """

    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-fence-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.store = persistence.Store("sqlite:///%s/e.sqlite" % tmp)
        self.addCleanup(self.store.close)
        self.store.create(MID, {"state": "queued", "direction": "outgoing",
                                "size": SIZE})

    def test_record_shows_owner_and_epoch(self):
        rec = self.store.record(MID)
        self.assertEqual((None, 0), (rec["owner"], rec["epoch"]))
        self.assertEqual(1, self.store.claim(MID, "engine-1", 0))
        rec = self.store.record(MID)
        self.assertEqual(("engine-1", 1), (rec["owner"], rec["epoch"]))

    def test_two_claims_of_one_epoch_one_wins(self):
        epoch = self.store.record(MID)["epoch"]
        self.assertEqual(1, self.store.claim(MID, "engine-1", epoch))
        self.assertRaises(exception.MigrationClaimLost, self.store.claim,
                          MID, "engine-2", epoch)
        self.assertEqual("engine-1", self.store.record(MID)["owner"])

    def test_save_with_the_claim_s_epoch(self):
        epoch = self.store.claim(MID, "engine-1", 0)
        rec = self.store.save(MID, epoch=epoch, state="running",
                              stages={"export": {"state": "running",
                                                 "done": 10}})
        self.assertEqual(("running", 10, 1),
                         (rec["state"], rec["bytes_export"], rec["epoch"]))
        self.assertEqual(rec["state"], self.store.record(MID)["state"])

    def test_stale_save_writes_nothing(self):
        mine = self.store.claim(MID, "engine-1", 0)
        self.store.claim(MID, "engine-2", mine)
        before = self.store.record(MID)
        events = self.store.events(MID)
        exc = self.assertRaises(
            exception.MigrationClaimLost, self.store.save, MID, epoch=mine,
            notes=[(None, "note", "x", None)], state="failed", error="x")
        self.assertIn("epoch 1", str(exc))
        self.assertEqual(before, self.store.record(MID))
        self.assertEqual(events, self.store.events(MID))
        # Nor does a retry's new run.
        self.assertRaises(exception.MigrationClaimLost, self.store.new_run,
                          MID, epoch=mine, state="queued", stages={})
        self.assertEqual(before, self.store.record(MID))

    def test_saves_carry_the_claim_this_engine_holds(self):
        # Two engines' stores on one database: the one taken over has
        # its saves refused without naming an epoch, until it lets go.
        other = persistence.Store(self.store.url)
        self.addCleanup(other.close)
        mine = self.store.claim(MID, "engine-1", 0)
        self.assertEqual(mine, self.store.held(MID))
        self.store.save(MID, state="running")
        theirs = other.claim(MID, "engine-2", mine)
        before = self.store.record(MID)
        for _ in range(2):
            self.assertRaises(exception.MigrationClaimLost, self.store.save,
                              MID, stages={"export": {"done": 5}})
            self.assertEqual(before, self.store.record(MID))
        self.assertEqual("engine-2",
                         other.save(MID, state="running")["owner"])
        self.assertEqual(theirs, other.held(MID))
        self.store.release(MID)
        self.assertIsNone(self.store.held(MID))
        self.assertEqual("queued",
                         self.store.save(MID, state="queued")["state"])

    def test_a_takeover_runs_from_a_copy_the_engine_before_cannot_write(self):
        # TaskFlow's logbook fenced: the engine taken over writes on into
        # the flow detail it had, the new owner's claim resumes from a
        # copy of it.  Before: both flows wrote one detail, and the new
        # owner found the task the engine before reverted.
        other = persistence.Store(self.store.url)
        self.addCleanup(other.close)
        mine = self.store.claim(MID, "engine-1", 0)
        _, before, _ = self.store.load(MID)
        task = models.TaskDetail("export-image", uuidutils.generate_uuid())
        task.state, task.results = "SUCCESS", {"size": 7}
        before.add(task)
        with self.store.connection() as conn:
            conn.update_flow_details(before)
        other.claim(MID, "engine-2", mine)
        _, after, _ = other.load(MID)
        self.assertNotEqual(before.uuid, after.uuid)
        copied = _atom(after, "export-image")
        self.assertEqual(("SUCCESS", {"size": 7}),
                         (copied.state, copied.results))
        # The engine before writes on, twice: none of it is the new
        # owner's.
        for state in ("REVERTING", "REVERTED"):
            task.state = state
            with self.store.connection() as conn:
                conn.update_atom_details(task)
            _, now, _ = other.load(MID)
            self.assertEqual(after.uuid, now.uuid)
            self.assertEqual("SUCCESS", _atom(now, "export-image").state)
        # A first claim has nothing to fence: no copy.
        self.assertEqual(2, len(list(other._book(MID))))

    def test_save_without_an_epoch_is_not_checked(self):
        self.store.claim(MID, "engine-1", 0)
        self.store.claim(MID, "engine-2", 1)
        rec = self.store.save(MID, state="running")
        self.assertEqual(("running", "engine-2", 2),
                         (rec["state"], rec["owner"], rec["epoch"]))

    def test_a_save_does_not_move_the_fence(self):
        # The record's owner and epoch are the claim's: a save handing
        # the whole record back, or other ones, writes neither.
        epoch = self.store.claim(MID, "engine-1", 0)
        rec = dict(self.store.record(MID), owner="engine-9", epoch=7)
        row = persistence.to_row(rec)
        self.assertNotIn("owner", row)
        self.assertNotIn("epoch", row)
        self.assertNotIn("owner", row["details"])
        self.store.save(MID, epoch=epoch, owner="engine-9", state="running")
        got = self.store.record(MID)
        self.assertEqual(("engine-1", 1, "running"),
                         (got["owner"], got["epoch"], got["state"]))
