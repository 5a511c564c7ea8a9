"""Common ground of the migration tasks."""

import contextlib

import oslo_messaging as messaging
from oslo_log import log as logging
from taskflow import task

from dtn_migrate import exception
from dtn_migrate.common import polling
from dtn_migrate.common import stall

LOG = logging.getLogger(__name__)

#: RPC context of the engine's own calls to its agent.
CTXT = {}

#: What a restarting agent or broker makes an RPC call raise: a polling
#: task logs it and polls again, and its stall clock decides.
TRANSIENT_RPC = (messaging.MessagingTimeout, messaging.MessageDeliveryFailure,
                 messaging.ClientSendError)


#: Failures of a stage that only follow another stage's (or a cancel,
#: or the loss of the migration to another engine).
SECONDARY = (exception.MigrationCancelled, exception.StageFailed,
             exception.MigrationSuspended)


def sink_verifies(options):
    """The sink compares the transfer's sha512 with the source's before
    it says "done": unless the source turned that check off for this
    migration (``transfer_options`` ``verify_sha512`` false).
    """
    transfer = options.get("transfer_options") or {}
    return transfer.get("verify_sha512", True) is not False


class MigrationTask(task.Task):
    """A task with the engine's resources.  Names are fixed: a reloaded
    flow finds its tasks' persisted state by name.
    """

    default_name = None

    def __init__(self, resources, **kwargs):
        kwargs.setdefault("name", self.default_name)
        super().__init__(**kwargs)
        self.res = resources

    @property
    def conf(self):
        return self.res.conf

    def live(self, migration_id):
        return self.res.live_for(migration_id)

    def check_cancel(self, migration_id):
        """Raise MigrationSuspended once another engine holds the
        migration, MigrationCancelled after a cancel, StageFailed after
        another stage's failure.
        """
        live = self.live(migration_id)
        if live.fenced.is_set():
            raise exception.MigrationSuspended(migration_id=migration_id,
                                               reason=live.fenced_why)
        if live.cancel.is_set():
            raise exception.MigrationCancelled(migration_id=migration_id)
        if live.stop.is_set():
            raise exception.StageFailed(migration_id=migration_id,
                                        stage=self.name,
                                        reason="%s failed" % live.failed)

    def fenced(self, migration_id, what):
        """Whether another engine holds the migration now: then ``what``
        (a revert) is not done here, and it says so.
        """
        live = self.res.live.get(migration_id)
        if live is None or not live.fenced.is_set():
            return False
        LOG.info("migration %s: %s left to the engine that holds it now "
                 "(%s)", migration_id, what, live.fenced_why)
        return True

    def pause(self, migration_id, seconds=None):
        """Sleep a poll interval, or less if the migration is cancelled
        or another of its stages failed.
        """
        seconds = self.conf.engine.poll_interval if seconds is None \
            else seconds
        if self.live(migration_id).stop.wait(seconds):
            self.check_cancel(migration_id)

    @contextlib.contextmanager
    def stage_of(self, migration_id, stage):
        """Run a stage: its own failure stops the migration's other
        stages within a poll interval; a failure after they stopped is
        StageFailed (or MigrationCancelled).
        """
        try:
            yield
        except SECONDARY:
            raise
        except Exception:
            # A stage that fails once the migration is stopped fails
            # because of it: the first failure is the one to report.
            self.check_cancel(migration_id)
            self.live(migration_id).fail(stage)
            raise

    def await_event(self, migration_id, event, seen, seconds=None):
        """Wait until the event board holds a value of ``event`` newer
        than sequence ``seen``, for at most a poll interval (or
        ``seconds``), or less if the migration stops.
        """
        seconds = self.conf.engine.poll_interval if seconds is None \
            else seconds
        live = self.live(migration_id)
        self.res.events.wait(event, seen, seconds, stop=live.stop)
        if live.stop.is_set():
            self.check_cancel(migration_id)

    def follow(self, migration_id, stage, step, interval=None, event=None):
        """Poll until ``step()`` returns a result, and return it.

        ``step()`` returns ``(result, progress)``: ``result`` None to
        poll again after ``interval`` (the poll interval by default);
        ``progress`` anything that changes while ``stage`` moves on.
        The wait fails with StageStalled once it stayed the same for
        ``stall_timeout``, and stops at once on a cancel or when another
        stage failed.  A transient RPC failure of ``step`` is logged and
        counts as no progress.  With ``event`` (an event board key), the
        next step runs as soon as a newer value of it arrives, and at
        the latest after ``interval``.
        """
        clock = StallClock(migration_id, stage,
                           self.conf.engine.stall_timeout)
        last = {"progress": None, "seen": None}

        def attempt():
            self.check_cancel(migration_id)
            if event is not None:
                last["seen"] = self.res.events.seq_of(event)
            try:
                result, last["progress"] = step()
            except TRANSIENT_RPC as exc:
                LOG.warning("migration %s: %s: %s; polling again",
                            migration_id, stage, exc.__class__.__name__)
                result = None
            if result is None:
                clock.see(last["progress"])
            return result

        def pause(seconds):
            if event is None:
                self.pause(migration_id, seconds)
            else:
                self.await_event(migration_id, event, last["seen"], seconds)

        return polling.poll(
            attempt, interval=(self.conf.engine.poll_interval
                               if interval is None else interval),
            sleep=pause, done=lambda result: result is not None)


class StallClock(stall.Stall):
    """Fails a wait once nothing it watches changed for ``timeout``."""

    def __init__(self, migration_id, stage, timeout):
        super().__init__(timeout)
        self.migration_id = migration_id
        self.stage = stage

    def see(self, value):
        if not super().see(value) and self.stalled():
            raise exception.StageStalled(migration_id=self.migration_id,
                                         stage=self.stage,
                                         seconds=self.timeout)
