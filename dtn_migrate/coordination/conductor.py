"""The conductor of an engine: TaskFlow's, claiming jobs from the shared
jobboard and handing each to the engine (``dispatch``), several at once.

What it adds to TaskFlow's non-blocking conductor:

* ``dispatch(job, lost)`` decides a job's end (:data:`CONSUME`,
  :data:`ABANDON` or :data:`TRASH`: a poison job), instead of TaskFlow
  loading a flow from the job by itself: the engine resumes the flow
  from the migration's logbook, with its own records around it.
* A claim that can expire (Redis) is made with its expiry and extended
  every third of it while the job runs.  A claim found lost (another
  owner, an expired key, a lost ZooKeeper session) sets ``lost``, the
  event the engine suspends the job's flow on at once.
* A dispatch that raises abandons its job (another conductor tries it,
  and the engine's claim count bounds the tries), where TaskFlow's would
  trash it.
* Busy conductors leave new jobs to idle ones: a conductor that runs N
  jobs claims a job only once it has seen it on the board for N x
  ``stagger`` seconds (at most ``stagger_max``).  Every conductor sees a
  new job at about the same moment, so the least busy one takes it; a
  job nobody else takes waits at most ``stagger_max``.
"""

import collections
import contextlib
import threading
import time

from oslo_log import log as logging
from taskflow.conductors.backends import impl_nonblocking
from taskflow import exceptions as tf_exc

LOG = logging.getLogger(__name__)

#: A job's ends (what ``dispatch`` returns).
CONSUME, ABANDON, TRASH = "consume", "abandon", "trash"
ENDS = (CONSUME, ABANDON, TRASH)
#: Seconds a job waits on the board per job a conductor runs before that
#: conductor claims it, and at most.
STAGGER, STAGGER_MAX = 0.25, 2.0
#: Jobs whose first sight a conductor remembers.
_SEEN = 4096


class _ExpiringClaims:
    """A jobboard whose claims carry ``expiry`` (seconds)."""

    def __init__(self, board, expiry):
        self._board = board
        self._expiry = expiry

    def claim(self, job, who):
        return self._board.claim(job, who, expiry=self._expiry)

    def __getattr__(self, name):
        return getattr(self._board, name)


class Conductor(impl_nonblocking.NonBlockingConductor):
    """Claims jobs of ``board`` as ``name`` and runs up to ``max_jobs`` at
    once, each by ``dispatch(job, lost)`` (see the module's doc).
    ``claim_expiry``: seconds a claim lasts unless extended (None: as
    long as the session).
    """

    def __init__(self, name, board, dispatch, max_jobs, claim_expiry=None,
                 wait_timeout=0.5, stagger=STAGGER, stagger_max=STAGGER_MAX,
                 clock=time.monotonic):
        if claim_expiry:
            board = _ExpiringClaims(board, claim_expiry)
        super().__init__(name, board, wait_timeout=wait_timeout,
                         max_simultaneous_jobs=max_jobs)
        self.dispatch = dispatch
        self.claim_expiry = claim_expiry
        self._lock = threading.Lock()
        #: The events of the jobs this conductor runs, by job uuid.
        self._lost = {}
        self.stagger, self.stagger_max = stagger, stagger_max
        self._clock = clock
        self._seen = collections.OrderedDict()   # job uuid -> first seen

    def _can_claim_more_jobs(self, job):
        if not super()._can_claim_more_jobs(job):
            return False
        running = len(self._dispatched)
        if not running or not self.stagger:
            return True
        now = self._clock()
        seen = self._seen.setdefault(job.uuid, now)
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        return now - seen >= min(running * self.stagger, self.stagger_max)

    @property
    def name(self):
        return self._name

    def session_lost(self, why):
        """The backend dropped this conductor's session: every claim it
        held is gone.  Each running job's flow is told to suspend.
        """
        with self._lock:
            events = list(self._lost.values())
        if events:
            LOG.warning("%s: %s; the %d jobs it runs are suspended",
                        self._name, why, len(events))
        for event in events:
            event.set()

    def _dispatch_job(self, job):
        lost = threading.Event()
        with self._lock:
            self._lost[job.uuid] = lost
        try:
            with self._extending(job, lost):
                end = self.dispatch(job, lost)
        finally:
            with self._lock:
                self._lost.pop(job.uuid, None)
        if end not in ENDS:
            LOG.error("job %s: dispatch ended with %r: abandoned", job.name,
                      end)
            return ABANDON
        return end

    @contextlib.contextmanager
    def _extending(self, job, lost):
        if not self.claim_expiry:
            yield
            return
        done = threading.Event()
        thread = threading.Thread(
            target=self._extend, args=(job, lost, done),
            name="claim-%s" % job.name[:24], daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _extend(self, job, lost, done):
        """Every third of the expiry, extend ``job``'s claim while it is
        this conductor's; a claim found gone sets ``lost``.
        """
        while not done.wait(self.claim_expiry / 3.0):
            try:
                owner = self._owner(job)
                if owner != self._name or \
                        not job.extend_expiry(self.claim_expiry):
                    LOG.warning("%s: the claim of job %s is lost (owner "
                                "now %s)", self._name, job.name, owner)
                    lost.set()
                    return
            except tf_exc.TaskFlowException as exc:
                # The backend does not answer: the claim may still hold;
                # the next beat tries again (the expiry is three beats).
                LOG.warning("%s: the claim of job %s not extended: %s",
                            self._name, job.name, exc)

    def _owner(self, job):
        """Who holds ``job``'s claim now (None: nobody, or the job is
        gone; Redis's find_owner then fails to decode its None).
        """
        try:
            return self._jobboard.find_owner(job)
        except (tf_exc.NotFound, TypeError):
            return None

    def _on_job_done(self, job, fut):
        try:
            end = fut.result()
        except Exception:  # noqa: B902 - the job must end somehow
            LOG.exception("%s: job %s failed in its dispatch; abandoned",
                          self._name, job.name)
            end = ABANDON
        try:
            self._try_finish_job(job, end == CONSUME, trash=end == TRASH)
        finally:
            self._dispatched.discard(fut)
