"""The conductor's additions to TaskFlow's: the ends a dispatch returns,
claims made with their expiry and extended, a lost claim or session
told to the running jobs.  A jobboard stand-in in memory.
"""

import threading

from taskflow import exceptions as tf_exc

from dtn_migrate.coordination import conductor as conductor_mod
from tests.unit import testcase


class Job:
    def __init__(self, name):
        self.name = self.uuid = name
        self.details = {}
        self.extended = []
        self.extend_ok = True

    def extend_expiry(self, expiry):
        self.extended.append(expiry)
        return self.extend_ok


class Board:
    def __init__(self):
        self.calls = []
        self.owner = None

    def claim(self, job, who, expiry=None):
        self.calls.append(("claim", job.name, who, expiry))
        self.owner = who

    def find_owner(self, job):
        if self.owner == "raise":
            raise TypeError("<class 'NoneType'> can't be decoded")
        return self.owner

    def consume(self, job, who):
        self.calls.append(("consume", job.name, who))

    def abandon(self, job, who):
        self.calls.append(("abandon", job.name, who))

    def trash(self, job, who):
        self.calls.append(("trash", job.name, who))


class Done:
    """A finished future."""

    def __init__(self, value=None, exc=None):
        self.value, self.exc = value, exc

    def result(self):
        if self.exc is not None:
            raise self.exc
        return self.value


class TestConductor(testcase.TestCase):

    def conductor(self, dispatch, expiry=None):
        self.board = Board()
        return conductor_mod.Conductor("engine-1", self.board, dispatch,
                                       max_jobs=2, claim_expiry=expiry)

    def test_claims_carry_the_expiry(self):
        c = self.conductor(lambda job, lost: conductor_mod.CONSUME, 6.0)
        c._jobboard.claim(Job("j"), "engine-1")
        self.assertEqual([("claim", "j", "engine-1", 6.0)], self.board.calls)
        c = self.conductor(lambda job, lost: conductor_mod.CONSUME)
        self.assertIs(self.board, c._jobboard)

    def test_each_end_finishes_its_job(self):
        for end, call in ((conductor_mod.CONSUME, "consume"),
                          (conductor_mod.ABANDON, "abandon"),
                          (conductor_mod.TRASH, "trash")):
            c = self.conductor(lambda job, lost, end=end: end)
            job = Job("j")
            c._on_job_done(job, Done(c._dispatch_job(job)))
            self.assertEqual([(call, "j", "engine-1")], self.board.calls)

    def test_a_dispatch_that_raises_abandons(self):
        # TaskFlow's own would trash the job: another engine tries it.
        c = self.conductor(lambda job, lost: conductor_mod.CONSUME)
        c._on_job_done(Job("j"), Done(exc=RuntimeError("bug")))
        self.assertEqual([("abandon", "j", "engine-1")], self.board.calls)

    def test_an_unknown_end_abandons(self):
        c = self.conductor(lambda job, lost: True)
        self.assertEqual(conductor_mod.ABANDON, c._dispatch_job(Job("j")))

    def test_session_lost_tells_the_running_jobs(self):
        started, seen = threading.Event(), []

        def dispatch(job, lost):
            started.set()
            seen.append(lost.wait(10))
            return conductor_mod.ABANDON

        c = self.conductor(dispatch)
        thread = threading.Thread(target=c._dispatch_job, args=(Job("j"),))
        thread.start()
        started.wait(10)
        c.session_lost("its ZooKeeper session expired")
        thread.join(10)
        self.assertEqual([True], seen)
        self.assertEqual({}, c._lost)

    def test_the_claim_is_extended_while_the_job_runs(self):
        job = Job("j")

        def dispatch(job, lost):
            self.board.owner = "engine-1"
            for _ in range(200):
                if len(job.extended) >= 2:
                    break
                lost.wait(0.01)
            return conductor_mod.CONSUME

        c = self.conductor(dispatch, expiry=0.06)
        self.assertEqual(conductor_mod.CONSUME, c._dispatch_job(job))
        self.assertGreaterEqual(len(job.extended), 2)
        self.assertEqual({0.06}, set(job.extended))

    def test_a_claim_found_lost_tells_the_job(self):
        for how in ("other", "expired", "raise", None):
            job = Job("j")

            def dispatch(job, lost, how=how):
                self.board.owner = "engine-2" if how == "other" else how
                if how == "expired":
                    self.board.owner = "engine-1"
                    job.extend_ok = False
                return lost.wait(10) and conductor_mod.ABANDON

            c = self.conductor(dispatch, expiry=0.03)
            self.assertEqual(conductor_mod.ABANDON, c._dispatch_job(job),
                             how)

    def test_a_backend_that_does_not_answer_keeps_the_claim(self):
        job = Job("j")
        answers = [tf_exc.JobFailure("no answer"), "engine-1", "engine-1"]

        def find_owner(job):
            answer = answers.pop(0) if answers else "engine-1"
            if isinstance(answer, Exception):
                raise answer
            return answer

        def dispatch(job, lost):
            self.board.find_owner = find_owner
            for _ in range(200):
                if len(job.extended) >= 2 or lost.is_set():
                    break
                lost.wait(0.01)
            return conductor_mod.ABANDON if lost.is_set() \
                else conductor_mod.CONSUME

        c = self.conductor(dispatch, expiry=0.03)
        self.assertEqual(conductor_mod.CONSUME, c._dispatch_job(job))


class TestStagger(testcase.TestCase):
    """A busy conductor leaves a new job to idle ones for a while."""

    def setUp(self):
        super().setUp()
        self.now = [100.0]
        self.c = conductor_mod.Conductor(
            "engine-1", Board(), lambda job, lost: conductor_mod.CONSUME,
            max_jobs=8, stagger=0.25, stagger_max=1.0,
            clock=lambda: self.now[0])

    def running(self, n):
        self.c._dispatched.clear()
        self.c._dispatched.update(Done() for _ in range(n))

    def test_an_idle_conductor_claims_at_once(self):
        self.running(0)
        self.assertTrue(self.c._can_claim_more_jobs(Job("j1")))

    def test_the_busier_the_longer_it_waits(self):
        # Before: a conductor claimed up to its limit at once (a batch of
        # 12 went 8/4/0 over three engines).
        self.running(2)
        job = Job("j2")
        self.assertFalse(self.c._can_claim_more_jobs(job))
        self.now[0] += 0.4
        self.assertFalse(self.c._can_claim_more_jobs(job))
        self.now[0] += 0.1
        self.assertTrue(self.c._can_claim_more_jobs(job))
        # At most stagger_max, however busy.
        self.running(7)
        other = Job("j3")
        self.assertFalse(self.c._can_claim_more_jobs(other))
        self.now[0] += 1.0
        self.assertTrue(self.c._can_claim_more_jobs(other))

    def test_its_limit_still_holds(self):
        self.running(8)
        job = Job("j4")
        self.now[0] += 10
        self.c._can_claim_more_jobs(job)
        self.now[0] += 10
        self.assertFalse(self.c._can_claim_more_jobs(job))
