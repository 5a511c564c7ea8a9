"""A conductor's dispatch of a migration's job (engine.jobs): the claim
in the database, the job's end, poison jobs and duplicates.  A real
store (SQLite), a jobboard and migrations stand-ins.
"""

import shutil
import tempfile
import threading

from oslo_config import cfg
from taskflow import exceptions as tf_exc

from dtn_migrate import conf as dtn_conf
from dtn_migrate.coordination import conductor
from dtn_migrate.engine import jobs as jobs_mod
from dtn_migrate.engine import persistence
from tests.unit import testcase

MID = "a" * 32


class Job:
    def __init__(self, uuid, **details):
        self.uuid = self.name = uuid
        self.details = dict({"migration_id": MID}, **details)


class Board:
    def __init__(self):
        self.jobs = []

    def iterjobs(self, ensure_fresh=False):
        return list(self.jobs)

    def post(self, name, details=None):
        job = Job("j%d" % len(self.jobs), **(details or {}))
        self.jobs.append(job)
        return job


class Migrations:
    def __init__(self, store, end_state="complete"):
        self.store = store
        self.end_state = end_state
        self.ran, self.failed = [], []

    def run_claimed(self, migration_id):
        self.ran.append((migration_id, self.store.held(migration_id)))
        self.store.save(migration_id, state=self.end_state)

    def fail_poison(self, migration_id, reason):
        self.failed.append(reason)
        self.store.save(migration_id, state="failed", error=reason)

    def fence(self, migration_id, why):
        pass


class JobsTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="dtnm-jobs-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.store = persistence.Store("sqlite:///%s/e.sqlite" % tmp)
        self.addCleanup(self.store.close)
        self.store.create(MID, {"state": "queued", "direction": "outgoing",
                                "size": 10})
        conf = cfg.ConfigOpts()
        dtn_conf.register_opts(conf)
        conf([], project="dtn-migrate-test")
        conf.set_override("jobboard_max_claims", 3, "task_flow")
        self.migrations = Migrations(self.store)
        self.jobs = jobs_mod.Jobs(conf, self.migrations, "engine-1")
        self.jobs.board = Board()

    def dispatch(self, job):
        return self.jobs.dispatch(job, threading.Event())


class TestDispatch(JobsTestCase):

    def test_claimed_run_and_consumed(self):
        job = self.jobs.post(MID, "outgoing")
        self.assertEqual(conductor.CONSUME, self.dispatch(job))
        # Run under the claim: epoch 1, owner engine-1.
        self.assertEqual([(MID, 1)], self.migrations.ran)
        rec = self.store.record(MID)
        self.assertEqual(("complete", "engine-1", 1),
                         (rec["state"], rec["owner"], rec["epoch"]))

    def test_one_job_per_migration(self):
        first = self.jobs.post(MID, "outgoing")
        self.assertIsNone(self.jobs.post(MID, "outgoing"))
        self.assertEqual([first], self.jobs.board.jobs)

    def test_of_two_jobs_the_older_runs(self):
        older = Job("j0", epoch=0)
        newer = Job("j1", epoch=0)
        self.jobs.board.jobs = [older, newer]
        self.assertEqual(conductor.CONSUME, self.dispatch(newer))
        self.assertEqual([], self.migrations.ran)
        self.assertEqual(conductor.CONSUME, self.dispatch(older))
        self.assertEqual(1, len(self.migrations.ran))

    def test_an_unfinished_run_is_abandoned(self):
        self.migrations.end_state = "running"
        job = self.jobs.post(MID, "outgoing")
        self.assertEqual(conductor.ABANDON, self.dispatch(job))

    def test_a_finished_migration_s_job_is_consumed(self):
        job = self.jobs.post(MID, "outgoing")
        self.store.save(MID, state="cancelled")
        self.assertEqual(conductor.CONSUME, self.dispatch(job))
        self.assertEqual([], self.migrations.ran)

    def test_poison_after_max_claims(self):
        self.migrations.end_state = "running"
        job = self.jobs.post(MID, "outgoing")
        ends = [self.dispatch(job) for _ in range(4)]
        self.assertEqual([conductor.ABANDON] * 3 + [conductor.TRASH], ends)
        self.assertEqual(3, len(self.migrations.ran))
        rec = self.store.record(MID)
        self.assertEqual("failed", rec["state"])
        self.assertIn("taken over 3 times ([task_flow] jobboard_max_claims)",
                      rec["error"])

    def test_a_board_that_does_not_answer_posts_nothing(self):
        def post(name, details=None):
            raise tf_exc.JobFailure("session expired")
        self.jobs.board.post = post
        self.assertIsNone(self.jobs.post(MID, "outgoing"))
        self.assertEqual("queued", self.store.record(MID)["state"])

    def test_orphans_get_a_job(self):
        other = "b" * 32
        self.store.create(other, {"state": "running",
                                  "direction": "incoming", "size": 10})
        self.jobs.post(MID, "outgoing")
        self.assertEqual([other], self.jobs.orphans())
        self.assertEqual([MID, other], [j.details["migration_id"]
                                        for j in self.jobs.board.jobs])


class Drills:
    def __init__(self):
        self.ran = []
        self.ids = []

    def run_claimed(self, drill_id):
        self.ran.append(drill_id)

    def running(self):
        return list(self.ids)


class TestDrillJobs(JobsTestCase):
    """A drill's job (issue 39): any conductor runs it."""

    def setUp(self):
        super().setUp()
        self.drills = self.jobs.drills = Drills()
        self.store.save(MID, state="complete")

    def test_claimed_run_and_consumed(self):
        job = self.jobs.post_drill("d1")
        self.assertEqual(conductor.CONSUME, self.dispatch(job))
        self.assertEqual(["d1"], self.drills.ran)
        # The migration of the stand-in job is not touched.
        self.assertEqual([], self.migrations.ran)

    def test_an_engine_without_drills_abandons(self):
        job = self.jobs.post_drill("d1")
        self.jobs.drills = None
        self.assertEqual(conductor.ABANDON, self.dispatch(job))

    def test_of_two_jobs_the_older_runs(self):
        older = self.jobs.post_drill("d1")
        newer = self.jobs.post_drill("d1")
        self.assertEqual(conductor.CONSUME, self.dispatch(newer))
        self.assertEqual([], self.drills.ran)
        self.assertEqual(conductor.CONSUME, self.dispatch(older))
        self.assertEqual(["d1"], self.drills.ran)

    def test_a_running_drill_without_a_job_gets_one(self):
        self.drills.ids = ["d1", "d2"]
        self.jobs.post_drill("d1")
        self.assertEqual(["d2"], self.jobs.orphans())
        self.assertEqual(["d1", "d2"], [j.details.get("drill_id")
                                        for j in self.jobs.board.jobs])

    def test_a_board_that_does_not_answer_posts_nothing(self):
        def post(name, details=None):
            raise tf_exc.JobFailure("session expired")
        self.jobs.board.post = post
        self.assertIsNone(self.jobs.post_drill("d1"))
