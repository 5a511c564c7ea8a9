"""Migrations as jobs of the jobboard that active/active engines share
(``[task_flow] jobboard_enabled``; :mod:`dtn_migrate.coordination`).

An engine posts a job for each migration it is asked to run (one job
per migration: a migration that has one on the board gets no other),
and its conductor claims jobs, any engine's.  A claimed job's migration
is claimed in the database too (``Store.claim``: its owner and a new
epoch, which every later save of this engine carries), and its flow
runs from its logbook as a single engine runs it (``Running._run``).

* A migration another engine claims meanwhile (a takeover after this
  engine was paused or cut off) is *fenced* here: its next save is
  refused, and its flow stops without writing or undoing anything.  So
  does every flow of a conductor whose claims are lost (the ZooKeeper
  session expired; a Redis claim found gone).
* A job whose migration was claimed ``jobboard_max_claims`` times
  without finishing goes to the trash and its migration fails (a poison
  job) instead of cycling between engines.
* Two jobs of one migration (posted by two engines at once) are one:
  the job with the smallest uuid runs it; the other is consumed.
"""

import contextlib
import threading

from oslo_log import log as logging
from taskflow import exceptions as tf_exc

from dtn_migrate.common import states
from dtn_migrate.coordination import conductor as conductor_mod
from dtn_migrate.coordination import jobboard
from dtn_migrate import exception

LOG = logging.getLogger(__name__)

#: A migration's job name.
JOB_NAME = "migration-%s"
#: A drill's job name (its details: ``drill_id``).
DRILL_JOB_NAME = "drill-%s"


class Jobs:
    """The jobboard of ``migrations`` (a :class:`migrations.Migrations`),
    this engine (``host``) one of its conductors.
    """

    def __init__(self, conf, migrations, host):
        self.conf = conf
        self.migrations = migrations
        self.store = migrations.store
        self.host = host
        self.driver = jobboard.get_driver(conf)
        self.max_claims = conf.task_flow.jobboard_max_claims
        self.board = None
        self.conductor = None
        #: The protection drills (protection.drills.Drills) whose jobs
        #: this conductor runs too.
        self.drills = None
        self._stack = contextlib.ExitStack()
        self._thread = None
        self._lock = threading.Lock()

    # Life.
    def start(self):
        """Connect to the jobboard (JobFailure when it does not answer)
        and start claiming.
        """
        self.board = self._stack.enter_context(self.driver.job_board(
            self.store.backend, on_lost=self._session_lost))
        engine = self.conf.engine
        self.conductor = conductor_mod.Conductor(
            self.host, self.board, self.dispatch,
            max_jobs=engine.max_concurrent_migrations +
            engine.max_concurrent_imports,
            claim_expiry=self.driver.claim_expiry)
        self._thread = threading.Thread(target=self.conductor.run,
                                        name="conductor", daemon=True)
        self._thread.start()
        LOG.info("conductor %s claims jobs of the %s", self.host,
                 self.driver.describe())

    def stop(self, timeout=30):
        """Stop claiming; the flows running here stop at once (fenced:
        nothing undone) and their jobs go back to the board for another
        engine.
        """
        if self.conductor is None:
            return
        self.conductor.stop()
        self.migrations.suspend_all("its engine %s stops" % self.host)
        if self._thread is not None:
            self._thread.join(timeout)
        self._stack.close()

    def _session_lost(self, why):
        self.conductor.session_lost(why)

    # Posting.
    def jobs_of(self, migration_id):
        """The jobs on the board of ``migration_id``."""
        return [job for job in self.board.iterjobs(ensure_fresh=True)
                if (job.details or {}).get("migration_id") == migration_id]

    def post(self, migration_id, direction):
        """Post the job of ``migration_id`` unless it has one.  A
        jobboard that does not answer (a ZooKeeper session that just
        expired, a Redis restart) posts nothing: the record is saved,
        and the leading engine posts a job for it (:meth:`orphans`).
        """
        def details():
            if self.jobs_of(migration_id):
                return None
            return {"migration_id": migration_id, "direction": direction,
                    "epoch": self.store.record(migration_id)["epoch"]}
        with self._lock:
            return self._post("migration %s" % migration_id,
                              JOB_NAME % migration_id, details,
                              "the leading engine posts it")

    def post_drill(self, drill_id):
        """Post the job of a drill just started (its row is running).
        Returns the job, or None when the jobboard does not answer (the
        caller runs the drill itself).
        """
        return self._post("drill %s" % drill_id, DRILL_JOB_NAME % drill_id,
                          lambda: {"drill_id": drill_id},
                          "it runs on this engine")

    def _post(self, what, name, details, otherwise):
        """Post job ``name`` with ``details()`` (None: no job).  None when
        the jobboard does not answer: logged, with what happens
        ``otherwise``.
        """
        try:
            found = details()
            if found is None:
                return None
            job = self.board.post(name, details=found)
        except tf_exc.JobFailure as exc:
            LOG.warning("%s: not posted (%s); %s", what, exc, otherwise)
            return None
        LOG.debug("%s posted (job %s)", what, job.uuid)
        return job

    def orphans(self):
        """Post a job for every active migration, and every running
        drill, that has none (after an engine or the backend lost them);
        returns their ids.
        """
        details = [job.details or {}
                   for job in self.board.iterjobs(ensure_fresh=True)]
        posted = {d.get("migration_id") for d in details}
        found = []
        for meta in self.store.records(
                {"state": list(states.ACTIVE_STATES)},
                sort_keys=["created_at"], sort_dirs=["asc"]):
            if meta["migration_id"] not in posted:
                self.post(meta["migration_id"], meta["direction"])
                found.append(meta["migration_id"])
        if self.drills is not None:
            drilled = {d.get("drill_id") for d in details}
            for drill_id in self.drills.running():
                if drill_id not in drilled and self.post_drill(drill_id):
                    found.append(drill_id)
        return found

    def take_over(self, migration_id):
        """Claim ``migration_id`` here over whichever engine holds it (a
        cancel): that engine's next save is refused.  Returns the new
        epoch, or None for a migration no engine holds.
        """
        meta = self.store.record(migration_id)
        if meta is None or meta["state"] in states.FINAL_STATES or \
                not meta.get("owner"):
            return None
        epoch = self.store.claim(migration_id, self.host, meta["epoch"])
        LOG.info("migration %s taken over from %s (epoch %d)",
                 migration_id, meta["owner"], epoch)
        self._announce(meta)
        return epoch

    def _announce(self, meta):
        """Tell this DTN's agent of this engine's new claim of ``meta``'s
        migration: from now on it refuses the commands of the earlier
        claims (dtn_migrate.agent.fences).  An agent that does not answer
        learns it from this claim's first command instead.
        """
        migration_id = meta["migration_id"]
        try:
            self.migrations.res.command(migration_id, "fence_transfer",
                                        meta["transfer_id"])
        except Exception as exc:  # noqa: B902 - the next command fences
            LOG.warning("migration %s: the agent was not told of the new "
                        "claim: %s", migration_id, exc)

    # Claiming.
    def dispatch(self, job, lost):
        """Run ``job``'s migration here; its end (conductor.CONSUME,
        ABANDON or TRASH).
        """
        details = job.details or {}
        if details.get("drill_id"):
            return self._dispatch_drill(job, details["drill_id"])
        migration_id = details.get("migration_id")
        meta = self.store.record(migration_id) if migration_id else None
        if meta is None or meta["state"] not in states.ACTIVE_STATES:
            return conductor_mod.CONSUME
        if any(other.uuid < job.uuid for other in self.jobs_of(migration_id)):
            LOG.info("job %s: migration %s has an older job", job.uuid,
                     migration_id)
            return conductor_mod.CONSUME
        claims = meta["epoch"] - (details.get("epoch") or 0)
        if claims >= self.max_claims:
            self.migrations.fail_poison(
                migration_id, "it was taken over %d times ([task_flow] "
                "jobboard_max_claims) without finishing; last by %s"
                % (claims, meta.get("owner")))
            return conductor_mod.TRASH
        try:
            epoch = self.store.claim(migration_id, self.host, meta["epoch"])
        except exception.MigrationClaimLost as exc:
            LOG.warning("job %s: %s", job.uuid, exc)
            return conductor_mod.ABANDON
        LOG.info("migration %s claimed by %s (epoch %d, owner before: %s)",
                 migration_id, self.host, epoch, meta.get("owner") or "none")
        if meta.get("owner"):
            # Taken over: the engine before may still be alive.
            self._announce(meta)
        done = threading.Event()
        watch = threading.Thread(target=self._watch,
                                 args=(migration_id, lost, done),
                                 name="fence-%s" % migration_id[:8],
                                 daemon=True)
        watch.start()
        try:
            self.migrations.run_claimed(migration_id)
        finally:
            done.set()
            watch.join()
        meta = self.store.record(migration_id)
        if meta is not None and meta["state"] in states.FINAL_STATES:
            return conductor_mod.CONSUME
        return conductor_mod.ABANDON

    def _dispatch_drill(self, job, drill_id):
        """Run a drill's job here: it ends consumed (the drill saved its
        outcome), or abandoned for another engine when this engine has
        no drills to run.
        """
        if self.drills is None:
            return conductor_mod.ABANDON
        if any(other.uuid < job.uuid for other in self.board.iterjobs(
                ensure_fresh=True)
                if (other.details or {}).get("drill_id") == drill_id):
            return conductor_mod.CONSUME
        self.drills.run_claimed(drill_id)
        return conductor_mod.CONSUME

    def _watch(self, migration_id, lost, done):
        while not done.is_set():
            if lost.wait(0.2):
                self.migrations.fence(migration_id,
                                      "its jobboard claim was lost")
                return
